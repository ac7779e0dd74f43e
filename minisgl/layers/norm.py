"""RMSNorm，以及把"加残差"和"归一化"合在一起的 ``RMSNormFused``。

一个解码层的骨架是（transformers 的写法）::

    residual = h;  h = input_layernorm(h);  h = attn(h);  h = residual + h
    residual = h;  h = post_attention_layernorm(h);  h = mlp(h);  h = residual + h

把每个"+ residual"推迟到下一个 norm 里做，就成了（我们的写法）::

    h, residual = input_layernorm(h, residual)         # residual += h; h = norm(residual)
    h = attn(h)
    h, residual = post_attention_layernorm(h, residual)
    h = mlp(h)
    # 最后一层之后：h, _ = final_norm(h, residual)

两种写法算的是同一个东西，后者每层少存一份中间结果，而且"加"和"归一化"合成一个
kernel，只读写一遍显存。
"""

from __future__ import annotations

import torch

from minisgl.kernel import fused_add_rmsnorm, rmsnorm

from .base import BaseOP

__all__ = ["RMSNorm", "RMSNormFused"]


class RMSNorm(BaseOP):
    """``weight * x / sqrt(mean(x²) + eps)``。第 4 章对每个头的 q、k 做的 q_norm/k_norm 也是它。"""

    def __init__(self, size: int, eps: float) -> None:
        self.eps = eps
        self.weight = torch.empty(size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """返回新张量，``x`` 不变。"""
        return rmsnorm(x, self.weight, self.eps)

    def forward_inplace(self, x: torch.Tensor) -> None:
        """把结果写回 ``x``。``x`` 可以是 qkv 大矩阵的一个视图，写回就改了 qkv 里对应的列。"""
        rmsnorm(x, self.weight, self.eps, out=x)


class RMSNormFused(BaseOP):
    """带残差的 RMSNorm：``forward(x, residual) -> (normed, residual)``。

    - ``residual is None``（第一层的 input_layernorm）：``x`` 就是残差流的起点。返回
      ``(norm(x) 的新张量, x)``，``x`` 不被修改。
    - 否则**原地**：``residual`` 被改写成 ``x + residual``，``x`` 被改写成 ``norm(x + residual)``，
      返回的就是这两个对象本身。调用方此后不能再指望 ``x`` 里还是原来的值。
    """

    def __init__(self, size: int, eps: float) -> None:
        self.eps = eps
        self.weight = torch.empty(size)

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if residual is None:
            return rmsnorm(x, self.weight, self.eps), x
        fused_add_rmsnorm(x, residual, self.weight, self.eps)
        return x, residual
