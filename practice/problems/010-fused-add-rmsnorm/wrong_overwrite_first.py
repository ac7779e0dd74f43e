"""错误答案：先把归一化的结果写进 x，再用已经被改写的 x 去加 residual。"""

from __future__ import annotations

import torch


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    s = (x + residual).float()
    normed = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps)
    x.copy_(weight * normed.to(x.dtype))
    residual.add_(x)  # 错在这里：x 已经不是原来的 x 了
