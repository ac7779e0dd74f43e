"""KV 缓存：本章是存放 K/V 的池子（``BaseKVCachePool`` / ``MHAKVCache``）；
第 8、10 章在这里加上前缀缓存的管理器。"""

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
