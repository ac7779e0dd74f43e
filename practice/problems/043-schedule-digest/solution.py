"""参考答案：调度摘要——滚动的 SHA-256，二分找出两个 rank 第一次分歧的那一步。"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence


def encode_step(phase: str, uids: Sequence[int], extend_lens: Sequence[int]) -> bytes:
    if phase not in ("prefill", "decode"):
        raise ValueError(f"未知的阶段 {phase!r}")
    if len(uids) != len(extend_lens):
        raise ValueError(f"{len(uids)} 个 uid 却有 {len(extend_lens)} 个新 token 数")
    ids = ",".join(str(u) for u in uids)
    lens = ",".join(str(n) for n in extend_lens)
    return f"{phase}|{ids}|{lens};".encode("ascii")  # 结尾的 ; 让每一步自带边界


def prefix_digests(steps: Iterable[tuple[str, Sequence[int], Sequence[int]]]) -> list[str]:
    h = hashlib.sha256()
    out: list[str] = []
    for phase, uids, lens in steps:
        h.update(encode_step(phase, uids, lens))
        out.append(h.hexdigest())  # hexdigest 不结束 h，可以接着 update
    return out


def first_divergence(a: Sequence[str], b: Sequence[str]) -> int | None:
    n = min(len(a), len(b))
    # 不变量：[0, lo) 全部相同；hi 处（若 hi < n）不同，且之后也都不同（前缀无关的编码保证单调）
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] == b[mid]:
            lo = mid + 1
        else:
            hi = mid
    if lo < n:
        return lo
    return None if len(a) == len(b) else n
