"""练习 021：CUDA Graph 的档位——整理档位、补齐批大小、填上假请求。"""

from __future__ import annotations


def graph_batch_sizes(sizes: list[int], max_rows: int) -> list[int]:
    """升序、去重、去掉大于 max_rows 的档位。sizes 里有 < 1 的数或 max_rows < 1 时抛 ValueError。"""
    raise NotImplementedError("在这里实现 graph_batch_sizes")


def padded_batch_size(bs: int, sizes: list[int]) -> int | None:
    """sizes（升序）里不小于 bs 的最小一档；没有时返回 None。bs < 1 时抛 ValueError。"""
    raise NotImplementedError("在这里实现 padded_batch_size")


def pad_decode_batch(
    rows: list[tuple[int, int, int, int]], sizes: list[int], dummy_slot: int
) -> list[tuple[int, int, int, int]] | None:
    """把 decode 批次补齐到最近的一档，假请求的行是 (0, 0, dummy_slot, 1)。

    放不进任何一档时返回 None；rows 为空时抛 ValueError；不要改动 rows。
    """
    raise NotImplementedError("在这里实现 pad_decode_batch")
