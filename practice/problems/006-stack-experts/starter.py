"""练习 006：把一层 MoE 的专家按张量并行切好，叠成 gate_up 和 down 两个三维张量。"""

from __future__ import annotations

import torch


def stack_experts(
    weights: dict[str, torch.Tensor], prefix: str, num_experts: int, tp_size: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """weights 里有 {prefix}.experts.{e}.gate_proj/up_proj/down_proj.weight。

    返回 gate_up: (E, 2 * I / tp_size, H)（gate 行在前），down: (E, H, I / tp_size)；
    专家按编号叠放；参数不合法、分不均、缺权重时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 stack_experts")
