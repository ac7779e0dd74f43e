"""参考答案：按请求自己的长度切段，按 lse 合并，空段跳过。"""

from __future__ import annotations

import math
from collections.abc import Sequence

NEG_INF = float("-inf")


def split_length(n: int, num_splits: int, block: int) -> int:
    """每段的长度：ceil(ceil(n / num_splits) / block) * block。"""
    if n < 1 or num_splits < 1 or block < 1:
        raise ValueError(f"need n, num_splits, block >= 1, got {n}, {num_splits}, {block}")
    per = -(-n // num_splits)
    return -(-per // block) * block


def split_ranges(n: int, num_splits: int, block: int) -> list[tuple[int, int] | None]:
    """每段的 (start, end)；空段是 None。"""
    per = split_length(n, num_splits, block)
    ranges: list[tuple[int, int] | None] = []
    for s in range(num_splits):
        start = s * per
        end = min(start + per, n)
        ranges.append((start, end) if end > start else None)
    return ranges


def merge(parts: Sequence[tuple[Sequence[float], float]]) -> tuple[list[float], float]:
    """按 lse 加权合并各段的 (输出, lse)；lse 为 -inf 的段跳过。"""
    live = [(list(o), lse) for o, lse in parts if lse != NEG_INF]
    if not live:
        raise ValueError("no non-empty split")
    dim = len(live[0][0])
    if any(len(o) != dim for o, _ in live):
        raise ValueError("output vectors have different lengths")
    top = max(lse for _, lse in live)
    weights = [math.exp(lse - top) for _, lse in live]
    total = sum(weights)
    out = [sum(w * o[d] for w, (o, _) in zip(weights, live)) / total for d in range(dim)]
    return out, top + math.log(total)


def _partial(
    scores: Sequence[float], values: Sequence[Sequence[float]]
) -> tuple[list[float], float]:
    m = max(scores)
    w = [math.exp(s - m) for s in scores]
    total = sum(w)
    dim = len(values[0])
    out = [sum(wi * v[d] for wi, v in zip(w, values)) / total for d in range(dim)]
    return out, m + math.log(total)


def split_k_attention(
    scores: Sequence[float], values: Sequence[Sequence[float]], num_splits: int, block: int
) -> list[float]:
    """切段、每段算 (输出, lse)、合并。"""
    if len(scores) != len(values):
        raise ValueError("scores and values must have the same length")
    dim = len(values[0]) if values else 0
    parts: list[tuple[list[float], float]] = []
    for r in split_ranges(len(scores), num_splits, block):
        if r is None:
            parts.append(([math.nan] * dim, NEG_INF))
        else:
            parts.append(_partial(scores[r[0] : r[1]], values[r[0] : r[1]]))
    return merge(parts)[0]
