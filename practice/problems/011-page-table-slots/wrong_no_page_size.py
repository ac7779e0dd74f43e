"""错误答案：把页号当成了槽位，忘了乘 page_size（page_size = 1 时碰巧是对的）。"""

from __future__ import annotations


def token_slots(pages: list[int], page_size: int, length: int) -> list[int]:
    if page_size < 1 or length < 0:
        raise ValueError(f"page_size={page_size}, length={length}")
    if length > len(pages) * page_size:
        raise ValueError(f"{len(pages)} 页装不下 {length} 个 token")
    return [pages[i // page_size] + i % page_size for i in range(length)]  # 错在这里


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
            raise ValueError(f"cached_len={cached_len}, device_len={device_len}")
        positions.extend(range(cached_len, device_len))
        out_loc.extend(row[cached_len:device_len])
    return positions, out_loc
