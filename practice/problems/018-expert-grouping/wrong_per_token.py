"""错误答案：对每个 (token, 专家) 对各调用一次专家——结果对，但专家被调用了 T·k 次。"""

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
    group_by_expert(ids, num_experts)
    out = []
    for t, row in enumerate(x):
        acc = [0.0] * len(row)
        for e, w in zip(ids[t], weights[t]):
            (y,) = expert_fn(e, [list(row)])  # 错在这里：每个 token 单独调用一次
            acc = [a + w * v for a, v in zip(acc, y)]
        out.append(acc)
    return out
