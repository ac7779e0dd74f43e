"""错误答案：每一层都把残差流重新从上一层的输出开始——丢掉了更早的残差。"""

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
    x = h
    for layer in layers:
        residual = x.clone()  # 错在这里：残差流应当一直传下去，而且要先把 MLP 的输出加进去
        x = rmsnorm(x, layer.input_norm, eps)
        x = layer.attn(x)
        fused_add_rmsnorm(x, residual, layer.post_norm, eps)
        x = layer.mlp(x)
        x = x + residual
    return rmsnorm(x, final_norm, eps)
