"""``AttentionLayer``：一层注意力里 QKV 投影和输出投影之间的全部事情。

输入是 qkv 投影的输出 ``(T, (Hq + 2*Hkv) * D)``（这个 rank 的那几个头），输出是
``(T, Hq * D)``，交给 o_proj。中间依次是::

    切开 q、k、v → q/k 逐头 RMSNorm（Qwen3 有，Llama 没有）→ RoPE → 后端（写 KV、算注意力）

位置、KV 槽位、元数据都不经过参数传进来，而是从全局上下文的 ``ctx.batch`` 里取：模型的
``forward()`` 只传隐藏状态，和 transformers 的写法一样。
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from minisgl.core import get_global_ctx
from minisgl.distributed import get_tp_info
from minisgl.utils import div_even

from .base import BaseOP
from .rotary import get_rope

if TYPE_CHECKING:
    from minisgl.models.config import RotaryConfig

    from .norm import RMSNorm

__all__ = ["AttentionLayer"]


# >> ch19
from minisgl.attention.base import QKNormRope


# << ch19
class AttentionLayer(BaseOP):
    """没有自己的权重。``q_norm``、``k_norm``（形状 ``(head_dim,)`` 的 RMSNorm）由外层的注意力块
    持有和加载——权重名是 ``self_attn.q_norm.weight``——这里只借用，所以存成下划线属性，
    不进状态字典。

    注意：``forward`` 会**原地**改写传进来的 qkv（归一化和 RoPE 写回 q、k 那几列），
    省掉一次拷贝；调用方之后不该再用它。
    """

    def __init__(
        self,
        layer_id: int,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim: int,
        rotary_config: RotaryConfig,
        q_norm: RMSNorm | None = None,
        k_norm: RMSNorm | None = None,
    ) -> None:
        if num_qo_heads % num_kv_heads != 0:
            raise ValueError(f"{num_qo_heads} q heads cannot share {num_kv_heads} kv heads")
        tp_size = get_tp_info().size
        self.layer_id = layer_id
        self.head_dim = head_dim
        self.num_qo_heads = div_even(num_qo_heads, tp_size)  # 本 rank 的头数
        self.num_kv_heads = div_even(num_kv_heads, tp_size, allow_replicate=True)
        self.qo_attn_dim = self.num_qo_heads * head_dim
        self.kv_attn_dim = self.num_kv_heads * head_dim
        self.rotary = get_rope(rotary_config)  # 没有权重（cos/sin 表是下划线属性）
        self._q_norm = q_norm
        self._k_norm = k_norm
        # >> ch19
        # q_norm、k_norm 和 RoPE 合成一个算子（第 19 章）：两个 norm 的 eps 相同时，它和分开的
        # 三步算的是同一个东西
        self._fuse_norm_rope = (
            q_norm is not None and k_norm is not None and q_norm.eps == k_norm.eps
        )
        # << ch19

    def forward(self, qkv: torch.Tensor) -> torch.Tensor:
        ctx = get_global_ctx()
        batch = ctx.batch
        # split 得到的是 qkv 的视图：下面的原地操作直接改在 qkv 上
        q, k, v = qkv.split([self.qo_attn_dim, self.kv_attn_dim, self.kv_attn_dim], dim=-1)
        q = q.view(-1, self.num_qo_heads, self.head_dim)
        k = k.view(-1, self.num_kv_heads, self.head_dim)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        # >> ch19
        if self._fuse_norm_rope:  # 下面三步合成一个算子，交给后端：它也许连写 KV 一起做
            assert self._q_norm is not None and self._k_norm is not None
            norm_rope = QKNormRope(
                batch.positions, self._q_norm.weight, self._k_norm.weight, self._q_norm.eps,
                self.rotary.table_on(batch.positions.device),
            )  # fmt: skip
            o = ctx.attn_backend.forward_norm_rope(q, k, v, self.layer_id, batch, norm_rope)
            return o.reshape(-1, self.qo_attn_dim)
        # << ch19
        if self._q_norm is not None:
            self._q_norm.forward_inplace(q)  # 每个头单独归一化：沿最后一维（head_dim）
        if self._k_norm is not None:
            self._k_norm.forward_inplace(k)
        self.rotary.forward(batch.positions, q, k)  # 原地旋转
        o = ctx.attn_backend.forward(q, k, v, self.layer_id, batch)
        return o.reshape(-1, self.qo_attn_dim)
