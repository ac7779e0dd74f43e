"""多头注意力（MHA/GQA）的 KV 池：一整块张量装下所有层、所有页的 K 和 V。"""

from __future__ import annotations

import torch

from minisgl.distributed import get_tp_info
from minisgl.kernel import store_cache
from minisgl.utils import div_even

from .base import BaseKVCachePool

__all__ = ["MHAKVCache"]


class MHAKVCache(BaseKVCachePool):
    """``_kv_buffer`` 的形状是 ``(2, 层数, 页数, page_size, 本 rank 的 kv 头数, head_dim)``：
    第 0 维的 0 是 K、1 是 V。

    一次分配好全部显存（第 7 章按剩余显存算出页数），之后只读写、不再分配：推理过程中
    没有 ``torch.cat``，也就没有显存碎片。张量并行时每个 rank 只存自己那几个 KV 头
    （KV 头比 rank 少时，几个 rank 存同一个头的副本）。
    """

    def __init__(
        self,
        num_kv_heads: int,
        num_layers: int,
        head_dim: int,
        num_pages: int,
        page_size: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        sizes = {
            "num_layers": num_layers,
            "head_dim": head_dim,
            "num_pages": num_pages,
            "page_size": page_size,
        }
        for name, value in sizes.items():
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        local_kv_heads = div_even(num_kv_heads, get_tp_info().size, allow_replicate=True)
        # zeros 而不是 empty：空槽位读出来是 0 而不是上一次留下的垃圾（甚至 NaN），出错时好查；
        # 在 CPU 上也让内存在这里真正分配出来，而不是等到第一次写入
        self._kv_buffer = torch.zeros(
            (2, num_layers, num_pages, page_size, local_kv_heads, head_dim),
            dtype=dtype,
            device=device,
        )
        self._num_layers = num_layers
        self._num_pages = num_pages
        self._page_size = page_size
        self.num_kv_heads = local_kv_heads
        self.head_dim = head_dim

    def k_cache(self, layer_id: int) -> torch.Tensor:
        return self._kv_buffer[0, layer_id]

    def v_cache(self, layer_id: int) -> torch.Tensor:
        return self._kv_buffer[1, layer_id]

    def store_kv(
        self, k: torch.Tensor, v: torch.Tensor, out_loc: torch.Tensor, layer_id: int
    ) -> None:
        # 写入时不关心页：把 (页数, page_size) 两维摊平成"槽位"一维，槽位号就是行号
        flat = (self.num_slots, self.num_kv_heads, self.head_dim)
        store_cache(
            self.k_cache(layer_id).view(flat),
            self.v_cache(layer_id).view(flat),
            out_loc,
            k,
            v,
        )

    @property
    def num_layers(self) -> int:
        return self._num_layers

    @property
    def num_pages(self) -> int:
        return self._num_pages

    @property
    def page_size(self) -> int:
        return self._page_size

    @property
    def device(self) -> torch.device:
        return self._kv_buffer.device

    @property
    def dtype(self) -> torch.dtype:
        return self._kv_buffer.dtype

    @property
    def num_bytes(self) -> int:
        """整个池子占多少字节。"""
        return self._kv_buffer.numel() * self._kv_buffer.element_size()
