"""错误答案：用了 bisect_right——批大小正好等于某一档时跳到了下一档，等于最大一档时干脆不用图。"""

from __future__ import annotations

import bisect


def graph_batch_sizes(sizes: list[int], max_rows: int) -> list[int]:
    if max_rows < 1 or any(s < 1 for s in sizes):
        raise ValueError("档位或 max_rows 不合法")
    return sorted({s for s in sizes if s <= max_rows})


def padded_batch_size(bs: int, sizes: list[int]) -> int | None:
    if bs < 1:
        raise ValueError("批大小必须 >= 1")
    i = bisect.bisect_right(sizes, bs)  # 错在这里
    return sizes[i] if i < len(sizes) else None


def pad_decode_batch(
    rows: list[tuple[int, int, int, int]], sizes: list[int], dummy_slot: int
) -> list[tuple[int, int, int, int]] | None:
    padded = padded_batch_size(len(rows), sizes)
    if padded is None:
        return None
    return list(rows) + [(0, 0, dummy_slot, 1)] * (padded - len(rows))
