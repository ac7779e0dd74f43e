"""练习 010：原地的 fused_add_rmsnorm。"""

from __future__ import annotations

import torch


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    """原地：residual ← x + residual；x ← weight * rmsnorm(新的 residual)。返回 None。

    方差在 float32 里算，归一化的结果先转回 x.dtype 再乘 weight。
    """
    raise NotImplementedError("在这里实现 fused_add_rmsnorm")
