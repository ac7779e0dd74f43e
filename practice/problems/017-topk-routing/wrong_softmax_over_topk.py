"""错误答案：先按打分取 top-k，再只在这 k 个打分上做 softmax。

重新归一化时这恰好是对的（两种做法的结果相同）；不重新归一化时，权重应当是在全部 E 个专家上的
概率，加起来小于 1，这里却总是加起来等于 1。
"""

from __future__ import annotations

import math


def route(logits: list[float], k: int, renormalize: bool) -> list[tuple[int, float]]:
    if not logits or not 1 <= k <= len(logits):
        raise ValueError(f"logits={logits!r}, k={k}")
    chosen = sorted(range(len(logits)), key=lambda e: (-logits[e], e))[:k]
    top = max(logits[e] for e in chosen)
    exps = {e: math.exp(logits[e] - top) for e in chosen}
    total = sum(exps.values())  # 错在这里：分母只有 k 项，无论 renormalize 是什么
    return [(e, exps[e] / total) for e in chosen]


def expert_load(routes: list[list[tuple[int, float]]], num_experts: int) -> list[int]:
    counts = [0] * num_experts
    for token in routes:
        for e, _ in token:
            if not 0 <= e < num_experts:
                raise ValueError(f"专家编号 {e} 越界")
            counts[e] += 1
    return counts
