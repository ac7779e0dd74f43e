"""练习 058：decode 补页——整批一次写进页表。"""

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
    raise NotImplementedError("在这里实现 pages_for")


def decode_page_writes(
    reqs: Sequence[Req], free: list[int], page_size: int
) -> tuple[list[int], list[int], list[int]]:
    """给缺页的请求补页（free.pop()），返回要写进页表的 (rows, cols, slots)。"""
    raise NotImplementedError("在这里实现 decode_page_writes")
