"""门控激活：``act(gate) * up``。

Llama、Qwen 的 MLP 是 ``down(act(gate(x)) * up(x))``。gate 和 up 合成一个矩阵乘
（``gate_up_proj``）之后，输出的前一半是 gate、后一半是 up，激活和逐元素乘也就合成一个算子。
模型配置里的 ``hidden_act`` 是一个字符串，``get_act_and_mul`` 按名字找到对应的实现。
"""

from __future__ import annotations

from typing import Callable

import torch

from minisgl import kernel
from minisgl.utils import Registry

__all__ = ["ACT_AND_MUL", "gelu_and_mul", "gelu_tanh_and_mul", "get_act_and_mul", "silu_and_mul"]

ActAndMul = Callable[[torch.Tensor], torch.Tensor]

# 键是 Hugging Face config.json 里 hidden_act 的写法
ACT_AND_MUL: Registry[ActAndMul] = Registry("activation")


@ACT_AND_MUL.register("silu")
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``(…, 2I) -> (…, I)``：``silu(x[..., :I]) * x[..., I:]``。"""
    return kernel.silu_and_mul(x)


@ACT_AND_MUL.register("gelu")
def gelu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """精确的（erf）GELU。"""
    return kernel.gelu_and_mul(x)


@ACT_AND_MUL.register("gelu_pytorch_tanh")
def gelu_tanh_and_mul(x: torch.Tensor) -> torch.Tensor:
    """tanh 近似的 GELU（Gemma 等模型用）。"""
    return kernel.gelu_and_mul(x, approximate="tanh")


def get_act_and_mul(hidden_act: str) -> ActAndMul:
    """``config.hidden_act`` → 门控激活函数；不支持的名字报错并列出支持的。"""
    return ACT_AND_MUL.get(hidden_act)
