"""错误答案：切分、叠放都对，但返回的是 list 而不是题面要求的 tuple。"""

from __future__ import annotations

import torch


def stack_experts(
    weights: dict[str, torch.Tensor], prefix: str, num_experts: int, tp_size: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    if tp_size < 1:
        raise ValueError(f"tp_size 必须 >= 1，得到 {tp_size}")
    if not 0 <= rank < tp_size:
        raise ValueError(f"rank={rank} 超出范围 [0, {tp_size})")

    def get(e: int, name: str) -> torch.Tensor:
        key = f"{prefix}.experts.{e}.{name}.weight"
        if key not in weights:
            raise ValueError(f"缺少 {key}")
        return weights[key]

    gate_up, down = [], []
    for e in range(num_experts):  # 按编号，而不是按字典里键的顺序
        gate, up, d = get(e, "gate_proj"), get(e, "up_proj"), get(e, "down_proj")
        inter = gate.shape[0]
        if inter % tp_size != 0:
            raise ValueError(f"中间维度 {inter} 不能被 tp_size={tp_size} 整除")
        n = inter // tp_size
        rows = slice(rank * n, (rank + 1) * n)
        # 先切再拼：gate 和 up 各取本 rank 的那几行
        gate_up.append(torch.cat([gate[rows], up[rows]]))
        down.append(d[:, rows])
    return [torch.stack(gate_up), torch.stack(down)]  # 错在这里：应当是 tuple
