"""错误答案：只排序去重，没有去掉比页表行数还多的档位。"""

from __future__ import annotations


def graph_batch_sizes(sizes: list[int], max_rows: int) -> list[int]:
    if max_rows < 1 or any(s < 1 for s in sizes):
        raise ValueError("档位或 max_rows 不合法")
    return sorted(set(sizes))  # 错在这里：忘了 max_rows


def padded_batch_size(bs: int, sizes: list[int]) -> int | None:
    if bs < 1:
        raise ValueError("批大小必须 >= 1")
    for size in sizes:  # 线性查找也对，只是慢一些
        if size >= bs:
            return size
    return None


def pad_decode_batch(
    rows: list[tuple[int, int, int, int]], sizes: list[int], dummy_slot: int
) -> list[tuple[int, int, int, int]] | None:
    padded = padded_batch_size(len(rows), sizes)
    if padded is None:
        return None
    return list(rows) + [(0, 0, dummy_slot, 1)] * (padded - len(rows))
