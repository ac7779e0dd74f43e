"""KV 池的接口：所有层的 K/V 按"槽位"存放，注意力后端按槽位读写。

一个槽位放一个 token 在一层里的 K（或 V）：``(kv 头数, head_dim)`` 个数。槽位按页分组，
一页 ``page_size`` 个槽位，第 ``p`` 页是槽位 ``p * page_size .. p * page_size + page_size - 1``。
KV 池只管存放，不管分配：哪个请求用哪几页由调度器（第 8 章）决定，写在页表里。
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

__all__ = ["BaseKVCachePool"]


class BaseKVCachePool(ABC):
    """KV 池。``k_cache(layer)`` / ``v_cache(layer)`` 的形状是
    ``(num_pages, page_size, kv 头数, head_dim)``——按页组织，分页的注意力 kernel 就按这个形状读。"""

    @abstractmethod
    def k_cache(self, layer_id: int) -> torch.Tensor: ...

    @abstractmethod
    def v_cache(self, layer_id: int) -> torch.Tensor: ...

    @abstractmethod
    def store_kv(
        self, k: torch.Tensor, v: torch.Tensor, out_loc: torch.Tensor, layer_id: int
    ) -> None:
        """把 ``T`` 个 token 的 K、V（``(T, kv 头数, head_dim)`` 或 ``(T, kv 头数 * head_dim)``）
        写进第 ``layer_id`` 层的槽位 ``out_loc``（``(T,)``）。"""

    @property
    @abstractmethod
    def num_layers(self) -> int: ...

    @property
    @abstractmethod
    def num_pages(self) -> int: ...

    @property
    @abstractmethod
    def page_size(self) -> int: ...

    @property
    @abstractmethod
    def device(self) -> torch.device: ...

    @property
    @abstractmethod
    def dtype(self) -> torch.dtype: ...

    @property
    def num_slots(self) -> int:
        """一共能放多少个 token。"""
        return self.num_pages * self.page_size


# >> ch08
# ---------------------------------------------------------------- 前缀缓存的接口（第 8 章）

from collections.abc import Sequence
from dataclasses import dataclass

__all__ += ["BasePrefixCache", "CacheHandle"]


@dataclass(frozen=True)
class CacheHandle:
    """一次前缀匹配的结果：前 ``cached_len`` 个 token 的 KV 已经在缓存里。

    ``node`` 是前缀缓存自己的东西（第 10 章是 radix 树上的一个节点），调用方只把它原样交回去
    加锁、解锁。页号不放在这里：匹配时单独返回，因为调用方要把它们写进页表。
    """

    cached_len: int
    node: object | None = None


class BasePrefixCache(ABC):
    """前缀缓存：记住"哪些 token 序列的 KV 在哪几页"，新请求来了先找最长的已缓存前缀。

    全部以页为单位：只缓存整页，匹配长度总是 ``page_size`` 的倍数。缓存里的页归缓存所有；
    被加锁（有请求正在用）的页不能被淘汰，没加锁的可以在空闲页不够时淘汰，还给空闲列表。
    第 8 章只有"什么都不缓存"的 ``NaivePrefixCache``；第 10 章加上 radix 树。
    """

    @abstractmethod
    def match_prefix(self, input_ids: Sequence[int]) -> tuple[CacheHandle, list[int]]:
        """``input_ids`` 最长的已缓存前缀：返回句柄和这段前缀的页号（按顺序）。"""

    @abstractmethod
    def lock(self, handle: CacheHandle) -> None:
        """有请求开始用这段前缀：它和它的所有祖先都不能被淘汰。"""

    @abstractmethod
    def unlock(self, handle: CacheHandle) -> None: ...

    @abstractmethod
    def insert_prefix(self, input_ids: Sequence[int], pages: Sequence[int]) -> None:
        """把一段整页的前缀和它的页交给缓存。已经缓存过的部分保持不变（调用方再匹配一次，
        发现页号不同，就知道自己那几页是重复的，自己释放）；新的部分从此归缓存所有。"""

    @abstractmethod
    def evict(self, num_pages: int) -> list[int]:
        """淘汰至少 ``num_pages`` 页没加锁的缓存（不够就尽量），返回被淘汰的页号。"""

    @property
    @abstractmethod
    def size_info(self) -> tuple[int, int]:
        """``(可淘汰的页数, 被锁住的页数)``。"""

    @abstractmethod
    def cached_pages(self) -> list[int]:
        """缓存持有的全部页号（检查完整性用）。"""

    @abstractmethod
    def check_integrity(self) -> None:
        """检查内部账目，不对就抛 ``RuntimeError``。"""


# << ch08
