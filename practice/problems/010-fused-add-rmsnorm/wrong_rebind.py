"""错误答案：用 = 重新绑定局部变量，调用方手里的张量一点没变。"""

from __future__ import annotations

import torch


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    residual = residual + x  # 错在这里：新张量，不是原地
    s = residual.float()
    normed = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps)
    x = weight * normed.to(x.dtype)  # noqa: F841  同样没有写回
