"""练习 052：逐页重放 KV 的账目——找出重复释放和泄漏，判断服务是否回到了空闲。"""

from __future__ import annotations

from typing import NamedTuple


class AccountingError(Exception):
    """日志里有不合法的操作。已经写好。"""


class Books(NamedTuple):
    """重放完之后的账目。已经写好，不要改。"""

    free: int  # 空闲的页数
    cached: int  # 缓存里可以淘汰的页数（/metrics 的 kv_pages_cached）
    locked: int  # 缓存里被活着的请求锁住的页数
    held: int  # 活着的请求自己拿着的页数
    leaked: tuple[int, ...]  # 泄漏的页号，升序
    running: tuple[int, ...]  # 还活着的请求的 uid，升序
    rows_free: int  # 空闲的请求表行数


def audit(num_pages: int, num_rows: int, log: list[tuple]) -> Books:
    """重放 log；不合法的事件抛 AccountingError("event i: ...")。"""
    raise NotImplementedError("在这里实现 audit")


def is_idle(books: Books, num_pages: int, num_rows: int) -> bool:
    """没有活着的请求，空闲页 + 可淘汰的缓存页 == 总页数，行全部空闲。"""
    raise NotImplementedError("在这里实现 is_idle")
