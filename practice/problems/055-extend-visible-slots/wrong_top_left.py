"""错误答案：左上角对齐（is_causal=True 的写法），第 j 个新 token 只看 row[:j + 1]。

没有前缀时碰巧对；有前缀时把前缀全丢了。
"""

from __future__ import annotations

from collections.abc import Sequence


def _check(cached: int, extend: int) -> None:
    if cached < 0 or extend < 1:
        raise ValueError(f"need cached >= 0 and extend >= 1, got {cached}, {extend}")


def visible_slots(row: Sequence[int], cached: int, extend: int) -> list[list[int]]:
    """第 j 个新 token（位置 cached + j）能读的槽位：位置 0 .. cached + j。"""
    _check(cached, extend)
    if len(row) < cached + extend:
        raise ValueError(f"page table row has {len(row)} columns, need {cached + extend}")
    return [list(row[: j + 1]) for j in range(extend)]


def kv_end(cached: int, extend: int, mb: int, block_m: int) -> int:
    """第 mb 块 q 需要扫到的 K/V 位置（不含）；没有 q 时返回 0。"""
    _check(cached, extend)
    if mb < 0 or block_m < 1:
        raise ValueError(f"need mb >= 0 and block_m >= 1, got {mb}, {block_m}")
    if mb * block_m >= extend:
        return 0
    return min(cached + extend, cached + (mb + 1) * block_m)


def kv_blocks(cached: int, extend: int, mb: int, block_m: int, block_n: int) -> int:
    """第 mb 块 q 要读几块 K/V。"""
    if block_n < 1:
        raise ValueError(f"block_n must be >= 1, got {block_n}")
    return -(-kv_end(cached, extend, mb, block_m) // block_n)
