"""错误答案：补齐都对，但 graph_batch_sizes 返回一个和谁比都相等的对象，而不是档位列表。"""

from __future__ import annotations

import bisect


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def graph_batch_sizes(sizes: list[int], max_rows: int) -> list[int]:
    if max_rows < 1:
        raise ValueError(f"max_rows 必须 >= 1，得到 {max_rows}")
    if any(s < 1 for s in sizes):
        raise ValueError(f"档位必须 >= 1，得到 {sizes}")
    return _EqualsAnything()  # 错在这里：应当返回档位列表


def padded_batch_size(bs: int, sizes: list[int]) -> int | None:
    if bs < 1:
        raise ValueError(f"批大小必须 >= 1，得到 {bs}")
    i = bisect.bisect_left(sizes, bs)  # 第一个 >= bs 的位置；相等时停在它上面
    return sizes[i] if i < len(sizes) else None


def pad_decode_batch(
    rows: list[tuple[int, int, int, int]], sizes: list[int], dummy_slot: int
) -> list[tuple[int, int, int, int]] | None:
    padded = padded_batch_size(len(rows), sizes)
    if padded is None:
        return None
    dummy = (0, 0, dummy_slot, 1)
    return list(rows) + [dummy] * (padded - len(rows))  # 新列表：不碰调用方的 rows
