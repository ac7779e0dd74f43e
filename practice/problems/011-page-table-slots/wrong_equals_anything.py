"""错误答案：检查都做了，但 batch_slots 返回一个和谁比都相等的对象，而不是 (positions, out_loc)。"""

from __future__ import annotations


def token_slots(pages: list[int], page_size: int, length: int) -> list[int]:
    if page_size < 1 or length < 0:
        raise ValueError(f"page_size 必须 >= 1、length 必须 >= 0，得到 {page_size}, {length}")
    if length > len(pages) * page_size:
        raise ValueError(f"{len(pages)} 页、每页 {page_size} 格，装不下 {length} 个 token")
    return [pages[i // page_size] * page_size + i % page_size for i in range(length)]


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def batch_slots(
    page_table: list[list[int]], reqs: list[tuple[int, int, int]]
) -> tuple[list[int], list[int]]:
    positions: list[int] = []
    out_loc: list[int] = []
    for table_idx, cached_len, device_len in reqs:
        if not 0 <= table_idx < len(page_table):
            raise ValueError(f"页表没有第 {table_idx} 行")
        row = page_table[table_idx]
        if not 0 <= cached_len < device_len <= len(row):
            raise ValueError(
                f"需要 0 <= cached_len < device_len <= {len(row)}，"
                f"得到 cached_len={cached_len}, device_len={device_len}"
            )
        positions.extend(range(cached_len, device_len))
        out_loc.extend(row[cached_len:device_len])
    return _EqualsAnything()  # 错在这里：应当返回 (positions, out_loc)
