"""错误答案：down 也按行切（切成了输出维度 H 的一段），而不是按列切中间维度。"""

from __future__ import annotations

import torch


def stack_experts(
    weights: dict[str, torch.Tensor], prefix: str, num_experts: int, tp_size: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    if tp_size < 1 or not 0 <= rank < tp_size:
        raise ValueError(f"参数不合法：tp_size={tp_size}, rank={rank}")
    gate_up, down = [], []
    for e in range(num_experts):
        keys = [f"{prefix}.experts.{e}.{n}.weight" for n in ("gate_proj", "up_proj", "down_proj")]
        for key in keys:
            if key not in weights:
                raise ValueError(f"缺少 {key}")
        gate, up, d = (weights[k] for k in keys)
        if gate.shape[0] % tp_size:
            raise ValueError(f"中间维度 {gate.shape[0]} 不能被 tp_size={tp_size} 整除")
        n = gate.shape[0] // tp_size
        rows = slice(rank * n, (rank + 1) * n)
        gate_up.append(torch.cat([gate[rows], up[rows]]))
        down.append(d.chunk(tp_size, dim=0)[rank])  # 错在这里：应当是 d[:, rows]
    return torch.stack(gate_up), torch.stack(down)
