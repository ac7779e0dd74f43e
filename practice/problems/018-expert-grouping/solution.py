"""参考答案：MoE——按专家分组，每个专家只算一次，再按权重加回各个 token。"""

from __future__ import annotations

from typing import Callable


def _check(ids: list[list[int]], num_experts: int) -> None:
    for t, row in enumerate(ids):
        for e in row:
            if not 0 <= e < num_experts:
                raise ValueError(f"token {t} 选了专家 {e}，不在 [0, {num_experts}) 里")
        if len(set(row)) != len(row):
            raise ValueError(f"token {t} 两次选了同一个专家：{row}")


def group_by_expert(ids: list[list[int]], num_experts: int) -> list[list[tuple[int, int]]]:
    _check(ids, num_experts)
    groups: list[list[tuple[int, int]]] = [[] for _ in range(num_experts)]
    for t, row in enumerate(ids):  # 按 token 顺序扫，每组里自然是 token 升序
        for j, e in enumerate(row):
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
        raise ValueError(f"x、ids、weights 的行数不同：{len(x)}, {len(ids)}, {len(weights)}")
    if any(len(w) != len(i) for w, i in zip(weights, ids)):
        raise ValueError("ids 和 weights 每一行的长度必须相同")
    groups = group_by_expert(ids, num_experts)
    out = [[0.0] * len(row) for row in x]
    for e, members in enumerate(groups):
        if not members:
            continue  # 没有 token 的专家：不调用
        ys = expert_fn(e, [list(x[t]) for t, _ in members])  # 传副本：专家改了也不影响 x
        for (t, j), y in zip(members, ys):
            w = weights[t][j]
            out[t] = [o + w * v for o, v in zip(out[t], y)]  # 加到这个 token 已有的结果上
    return out
