"""错误答案：把专家的输出**赋值**给 token，而不是加上去——k 个专家里只剩最后一个。"""

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
        if not members:
            continue
        ys = expert_fn(e, [list(x[t]) for t, _ in members])
        for (t, j), y in zip(members, ys):
            out[t] = [weights[t][j] * v for v in y]  # 错在这里：覆盖了前面专家的结果
    return out
