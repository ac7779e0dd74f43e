"""练习 054：split-K——把一段 K/V 切开算，再按 lse 合并。"""

from __future__ import annotations

from collections.abc import Sequence


def split_length(n: int, num_splits: int, block: int) -> int:
    """每段的长度：ceil(ceil(n / num_splits) / block) * block。"""
    raise NotImplementedError("在这里实现 split_length")


def split_ranges(n: int, num_splits: int, block: int) -> list[tuple[int, int] | None]:
    """每段的 (start, end)；空段是 None。"""
    raise NotImplementedError("在这里实现 split_ranges")


def merge(parts: Sequence[tuple[Sequence[float], float]]) -> tuple[list[float], float]:
    """按 lse 加权合并各段的 (输出, lse)；lse 为 -inf 的段跳过。"""
    raise NotImplementedError("在这里实现 merge")


def split_k_attention(
    scores: Sequence[float], values: Sequence[Sequence[float]], num_splits: int, block: int
) -> list[float]:
    """切段、每段算 (输出, lse)、合并。"""
    raise NotImplementedError("在这里实现 split_k_attention")
