"""错误答案：先把 gate、up 拼成 (2I, H) 再按行切——tp=2 时 rank 0 拿到的全是 gate，没有 up。"""

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
        merged = torch.cat([gate, up])
        gate_up.append(merged[2 * n * rank : 2 * n * (rank + 1)])  # 错在这里：先拼后切
        down.append(d[:, rank * n : (rank + 1) * n])
    return torch.stack(gate_up), torch.stack(down)
