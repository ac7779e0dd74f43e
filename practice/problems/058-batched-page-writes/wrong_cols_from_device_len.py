"""错误答案：新页的列号从 device_len - 1 开始算。

页大小为 1、每步只缺一页时碰巧对；页大小更大、或者一次缺好几页时就写错了列。
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Req:
    """一个正在 decode 的请求：页表里的行、已经拿到的页、这一步之后要放得下的 token 数。"""

    row: int
    pages: list[int]
    device_len: int


def pages_for(num_tokens: int, page_size: int) -> int:
    """放下 num_tokens 个 token 要几页。"""
    if page_size < 1 or num_tokens < 0:
        raise ValueError(f"bad arguments: num_tokens={num_tokens}, page_size={page_size}")
    return -(-num_tokens // page_size)


def decode_page_writes(
    reqs: Sequence[Req], free: list[int], page_size: int
) -> tuple[list[int], list[int], list[int]]:
    """给缺页的请求补页（free.pop()），返回要写进页表的 (rows, cols, slots)。"""
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    missing = [pages_for(r.device_len, page_size) - len(r.pages) for r in reqs]
    if sum(m for m in missing if m > 0) > len(free):
        raise ValueError("not enough free pages")
    rows: list[int] = []
    cols: list[int] = []
    slots: list[int] = []
    for req, m in zip(reqs, missing):
        col = req.device_len - 1
        for _ in range(m):  # m <= 0 时一圈也不走
            page = free.pop()
            req.pages.append(page)
            for i in range(page_size):
                rows.append(req.row)
                cols.append(col + i)
                slots.append(page * page_size + i)
            col += page_size
    return rows, cols, slots
