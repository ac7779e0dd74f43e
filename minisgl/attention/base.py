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


# >> ch19
from dataclasses import dataclass

from minisgl.kernel import qk_norm_rope_inplace, qk_norm_rope_store

__all__ += ["QKNormRope"]


@dataclass(frozen=True)
class QKNormRope:
    """一层注意力在 q、k 上要做的 q_norm、k_norm 和 RoPE（第 19 章合成了一个算子）。
    ``AttentionLayer`` 把它连同 q、k、v 交给后端：写 KV 能不能一起做，由后端决定。"""

    positions: torch.Tensor
    q_weight: torch.Tensor
    k_weight: torch.Tensor
    eps: float
    table: torch.Tensor  # RoPE 的 cos/sin 表，float32，在计算设备上

    def apply(self, q: torch.Tensor, k: torch.Tensor) -> None:
        """原地改写 q、k（``(T, 头数, head_dim)``）。"""
        qk_norm_rope_inplace(
            self.positions, q, k, self.q_weight, self.k_weight, self.eps, self.table, q.shape[-1]
        )

    def apply_and_store(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_pool: torch.Tensor,
        v_pool: torch.Tensor,
        out_loc: torch.Tensor,
    ) -> None:
        """``apply``，再把 k 和 v 写进 ``(槽位数, kv 头数, head_dim)`` 的 K、V 池的槽位
        ``out_loc``：GPU 上三件事一个 kernel。"""
        qk_norm_rope_store(
            self.positions, q, k, v, self.q_weight, self.k_weight, self.eps, self.table,
            q.shape[-1], k_pool, v_pool, out_loc,
        )  # fmt: skip


# << ch19
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

    # >> ch19
    def forward_norm_rope(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer_id: int,
        batch: Batch,
        norm_rope: QKNormRope,
    ) -> torch.Tensor:
        """先原地做 ``norm_rope``，再 ``forward``。能把写 KV 合进那一步的后端改写它。"""
        norm_rope.apply(q, k)
        return self.forward(q, k, v, layer_id, batch)

    # << ch19
