"""错误答案：对每个专家都调用一次，包括一个 token 也没有的专家（rows 是空列表）。"""

from __future__ import annotations

from typing import Callable


def group_by_expert(ids: list[list[int]], num_experts: int) -> list[list[tuple[int, int]]]:
    groups: list[list[tuple[int, int]]] = [[] for _ in range(num_experts)]
    for t, row in enumerate(ids):
        if len(set(row)) != len(row):
            raise ValueError(f"token {t} 两次选了同一个专家")
        for j, e in enumerate(row):
            if not 0 <= e < num_experts:
                raise ValueError(f"专家编号 {e} 越界")
            groups[e].append((t, j))
    return groups


def moe_combine(
    x: list[list[float]],
    ids: list[list[int]],
    weights: list[list[float]],
    num_experts: int,
    expert_fn: Callable[[int, list[list[float]]], list[list[float]]],
) -> list[list[float]]:
    if len(ids) != len(x) or len(weights) != len(ids):
        raise ValueError("行数不同")
    if any(len(w) != len(i) for w, i in zip(weights, ids)):
        raise ValueError("ids 和 weights 每一行的长度必须相同")
    groups = group_by_expert(ids, num_experts)
    out = [[0.0] * len(row) for row in x]
    for e, members in enumerate(groups):
        ys = expert_fn(e, [list(x[t]) for t, _ in members])  # 错在这里：空专家也调用
        for (t, j), y in zip(members, ys):
            out[t] = [o + weights[t][j] * v for o, v in zip(out[t], y)]
    return out
