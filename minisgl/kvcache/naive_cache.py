"""什么都不缓存的前缀缓存：每个请求都从头算，结束时页全部还回去。

它是第 8 章的默认实现，也是第 10 章 radix 树的对照组："radix 的输出 == naive 的输出"
是前缀复用正确的证据。
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import BasePrefixCache, CacheHandle

__all__ = ["NaivePrefixCache"]

_EMPTY = CacheHandle(cached_len=0)


class NaivePrefixCache(BasePrefixCache):
    def __init__(self, page_size: int) -> None:
        self.page_size = page_size  # 用不到，但所有前缀缓存都按同一个签名创建

    def match_prefix(self, input_ids: Sequence[int]) -> tuple[CacheHandle, list[int]]:
        return _EMPTY, []

    def lock(self, handle: CacheHandle) -> None:
        pass

    def unlock(self, handle: CacheHandle) -> None:
        pass

    def insert_prefix(self, input_ids: Sequence[int], pages: Sequence[int]) -> None:
        pass  # 不收下任何页：调用方再匹配时得到空前缀，页仍归请求自己，结束时释放

    def evict(self, num_pages: int) -> list[int]:
        return []

    @property
    def size_info(self) -> tuple[int, int]:
        return 0, 0

    def cached_pages(self) -> list[int]:
        return []

    def check_integrity(self) -> None:
        pass
