"""KV 缓存：存放 K/V 的池子（``BaseKVCachePool`` / ``MHAKVCache``）和前缀缓存（``naive``、
``radix``）。"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .base import BaseKVCachePool
from .mha_pool import MHAKVCache

if TYPE_CHECKING:
    from minisgl.models.config import ModelConfig

__all__ = ["BaseKVCachePool", "MHAKVCache", "create_kvcache_pool"]


def create_kvcache_pool(
    config: ModelConfig,
    num_pages: int,
    page_size: int,
    dtype: torch.dtype,
    device: torch.device | str,
) -> BaseKVCachePool:
    """按模型配置建 KV 池：每层一份，KV 头数和 head_dim 来自配置（张量并行的切分在池子里做）。"""
    return MHAKVCache(
        num_kv_heads=config.num_kv_heads,
        num_layers=config.num_layers,
        head_dim=config.head_dim,
        num_pages=num_pages,
        page_size=page_size,
        dtype=dtype,
        device=device,
    )


# >> ch08
# ---------------------------------------------------------------- 前缀缓存（第 8 章）

from collections.abc import Callable

from minisgl.utils import Registry

from .base import BasePrefixCache, CacheHandle
from .naive_cache import NaivePrefixCache

__all__ += [
    "SUPPORTED_PREFIX_CACHES",
    "BasePrefixCache",
    "CacheHandle",
    "NaivePrefixCache",
    "create_prefix_cache",
]
# >> ch10
from .radix_cache import RadixNode, RadixPrefixCache

__all__ += ["RadixNode", "RadixPrefixCache"]
# << ch10

# 按名字登记：命令行上的 --cache-type 在这里找实现。第 10 章再登记一个 "radix"
SUPPORTED_PREFIX_CACHES: Registry[Callable[[int], BasePrefixCache]] = Registry("prefix cache")
SUPPORTED_PREFIX_CACHES.register("naive")(NaivePrefixCache)
# >> ch10
SUPPORTED_PREFIX_CACHES.register("radix")(RadixPrefixCache)
# << ch10


def create_prefix_cache(name: str, page_size: int) -> BasePrefixCache:
    return SUPPORTED_PREFIX_CACHES.get(name)(page_size)


# << ch08
