"""错误答案：按字典里键的字符串顺序收集专家，专家 10 排到了专家 2 前面。"""

from __future__ import annotations

import re

import torch


def stack_experts(
    weights: dict[str, torch.Tensor], prefix: str, num_experts: int, tp_size: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    if tp_size < 1 or not 0 <= rank < tp_size:
        raise ValueError(f"参数不合法：tp_size={tp_size}, rank={rank}")
    pattern = re.compile(re.escape(prefix) + r"\.experts\.(\d+)\.gate_proj\.weight")
    found = [m.group(1) for k in sorted(weights) if (m := pattern.fullmatch(k))]  # 错在这里
    for e in range(num_experts):
        for n in ("gate_proj", "up_proj", "down_proj"):
            if f"{prefix}.experts.{e}.{n}.weight" not in weights:
                raise ValueError(f"缺少 {prefix}.experts.{e}.{n}.weight")
    gate_up, down = [], []
    for e in found:
        p = f"{prefix}.experts.{e}."
        gate, up, d = (
            weights[p + "gate_proj.weight"],
            weights[p + "up_proj.weight"],
            weights[p + "down_proj.weight"],
        )
        if gate.shape[0] % tp_size:
            raise ValueError(f"中间维度 {gate.shape[0]} 不能被 tp_size={tp_size} 整除")
        n = gate.shape[0] // tp_size
        rows = slice(rank * n, (rank + 1) * n)
        gate_up.append(torch.cat([gate[rows], up[rows]]))
        down.append(d[:, rows])
    return torch.stack(gate_up), torch.stack(down)
