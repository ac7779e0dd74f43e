"""参考答案：推迟残差的解码器。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


def _normalize(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """返回新张量：weight * x / sqrt(mean(x²) + eps)，沿最后一维。"""
    return _normalize(x, weight, eps)


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    """原地：residual <- x + residual；x <- rmsnorm(新的 residual)。"""
    residual.add_(x)
    x.copy_(_normalize(residual, weight, eps))


@dataclass
class Layer:
    input_norm: torch.Tensor
    attn: Callable[[torch.Tensor], torch.Tensor]
    post_norm: torch.Tensor
    mlp: Callable[[torch.Tensor], torch.Tensor]


def decoder_forward(
    h: torch.Tensor, layers: list[Layer], final_norm: torch.Tensor, eps: float
) -> torch.Tensor:
    if not layers:
        return rmsnorm(h, final_norm, eps)
    # 第一层没有残差可加：残差流从 h 的一份拷贝开始（之后会被原地改写，不能是调用方的 h）
    residual = h.clone()
    x = rmsnorm(h, layers[0].input_norm, eps)
    for i, layer in enumerate(layers):
        if i > 0:
            fused_add_rmsnorm(x, residual, layer.input_norm, eps)  # 加上一层 MLP 的输出
        x = layer.attn(x)
        fused_add_rmsnorm(x, residual, layer.post_norm, eps)  # 加注意力的输出
        x = layer.mlp(x)
    fused_add_rmsnorm(x, residual, final_norm, eps)  # 最后一层 MLP 的输出在这里加进去
    return x
