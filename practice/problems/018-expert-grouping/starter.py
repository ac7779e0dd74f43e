"""练习 018：MoE——按专家分组，每个专家只算一次，再按权重加回各个 token。"""

from __future__ import annotations

from typing import Callable


def group_by_expert(ids: list[list[int]], num_experts: int) -> list[list[tuple[int, int]]]:
    """groups[e] = 选了专家 e 的 (token 下标, 槽位 j)，按 token 下标从小到大。"""
    raise NotImplementedError("在这里实现 group_by_expert")


def moe_combine(
    x: list[list[float]],
    ids: list[list[int]],
    weights: list[list[float]],
    num_experts: int,
    expert_fn: Callable[[int, list[list[float]]], list[list[float]]],
) -> list[list[float]]:
    """out[t] = Σ_j weights[t][j] · expert_{ids[t][j]}(x[t])；每个有 token 的专家只调用一次。"""
    raise NotImplementedError("在这里实现 moe_combine")
