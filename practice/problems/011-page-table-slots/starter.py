"""练习 011：页表——从页到槽位，再到一个批次的 positions 和 out_loc。"""

from __future__ import annotations


def token_slots(pages: list[int], page_size: int, length: int) -> list[int]:
    """请求拿到页 pages，返回它前 length 个 token 的槽位。

    第 i 个 token 的槽位是 pages[i // page_size] * page_size + i % page_size；
    page_size < 1、length < 0 或页不够时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 token_slots")


def batch_slots(
    page_table: list[list[int]], reqs: list[tuple[int, int, int]]
) -> tuple[list[int], list[int]]:
    """reqs 的每一项是 (table_idx, cached_len, device_len)，返回 (positions, out_loc)。

    每个请求按顺序贡献位置 cached_len .. device_len - 1 和页表里对应的槽位；
    长度不合法或行不存在时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 batch_slots")
