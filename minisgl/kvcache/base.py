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
