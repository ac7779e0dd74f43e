"""错误答案：把假请求直接追加到调用方的 rows 上——调用方手里的批次被悄悄加长了。"""

from __future__ import annotations

import bisect


def graph_batch_sizes(sizes: list[int], max_rows: int) -> list[int]:
    if max_rows < 1 or any(s < 1 for s in sizes):
        raise ValueError("档位或 max_rows 不合法")
    return sorted({s for s in sizes if s <= max_rows})


def padded_batch_size(bs: int, sizes: list[int]) -> int | None:
    if bs < 1:
        raise ValueError("批大小必须 >= 1")
    i = bisect.bisect_left(sizes, bs)
    return sizes[i] if i < len(sizes) else None


def pad_decode_batch(
    rows: list[tuple[int, int, int, int]], sizes: list[int], dummy_slot: int
) -> list[tuple[int, int, int, int]] | None:
    padded = padded_batch_size(len(rows), sizes)
    if padded is None:
        return None
    rows.extend([(0, 0, dummy_slot, 1)] * (padded - len(rows)))  # 错在这里：原地改写
    return rows
