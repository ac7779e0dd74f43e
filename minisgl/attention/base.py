"""注意力后端的接口。

一个后端做两件事：

1. ``prepare_metadata(batch)``：每个批次调用一次，在模型前向**之前**。把"每个请求从哪到哪、
   KV 在哪些页、掩码长什么样"算好，存进 ``batch.attn_metadata``。模型有几十层，
   每层的注意力都用同一份元数据，算一次就够。
2. ``forward(q, k, v, layer_id, batch)``：每层调用一次。先把这一步新 token 的 K/V 写进 KV 池
   （``batch.out_loc``），再让每个新 token 的 q 去看它所在序列的全部 K/V（缓存的前缀 + 自己及
   之前的新 token），返回注意力的输出。

GPU 上的快速后端（FlashInfer、FlashAttention）也是这两步：``plan()`` 对应第 1 步，
``run()`` 对应第 2 步。
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from minisgl.core import Batch

__all__ = ["BaseAttnBackend", "BaseAttnMetadata"]


class BaseAttnMetadata(ABC):
    """``prepare_metadata`` 的产物。各后端的内容不同，共同的只有一个问题：每个请求的最后一个
    token 在一维排列里的下标是多少？LM head 只对这些位置算 logits（第 5 章）。"""

    @abstractmethod
    def get_last_indices(self, bs: int) -> torch.Tensor:
        """前 ``bs`` 个请求各自最后一个新 token 的下标，``(bs,)``，在计算设备上。"""


class BaseAttnBackend(ABC):
    @abstractmethod
    def prepare_metadata(self, batch: Batch) -> None:
        """算好这个批次的元数据，写进 ``batch.attn_metadata``。"""

    @abstractmethod
    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: Batch
    ) -> torch.Tensor:
        """``q``: ``(T, q 头数, head_dim)``；``k``、``v``: ``(T, kv 头数, head_dim)``，
        是这一步 ``T`` 个新 token 的。返回 ``(T, q 头数, head_dim)``。"""
