"""练习 055：按位置的因果掩码——extend 的每个新 token 能读哪些槽位。"""

from __future__ import annotations

from collections.abc import Sequence


def visible_slots(row: Sequence[int], cached: int, extend: int) -> list[list[int]]:
    """第 j 个新 token（位置 cached + j）能读的槽位：位置 0 .. cached + j。"""
    raise NotImplementedError("在这里实现 visible_slots")


def kv_end(cached: int, extend: int, mb: int, block_m: int) -> int:
    """第 mb 块 q 需要扫到的 K/V 位置（不含）；没有 q 时返回 0。"""
    raise NotImplementedError("在这里实现 kv_end")


def kv_blocks(cached: int, extend: int, mb: int, block_m: int, block_n: int) -> int:
    """第 mb 块 q 要读几块 K/V。"""
    raise NotImplementedError("在这里实现 kv_blocks")
