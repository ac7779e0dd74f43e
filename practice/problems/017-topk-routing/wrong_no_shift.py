"""错误答案：softmax 直接算 exp(logit)，打分大一点就溢出（math.exp(1000) 抛 OverflowError）。"""

from __future__ import annotations

import math


def route(logits: list[float], k: int, renormalize: bool) -> list[tuple[int, float]]:
    if not logits or not 1 <= k <= len(logits):
        raise ValueError(f"logits={logits!r}, k={k}")
    exps = [math.exp(x) for x in logits]  # 错在这里：没有先减去最大值
    total = sum(exps)
    probs = [e / total for e in exps]
    chosen = sorted(range(len(probs)), key=lambda e: (-probs[e], e))[:k]
    norm = sum(probs[e] for e in chosen) if renormalize else 1.0
    return [(e, probs[e] / norm) for e in chosen]


def expert_load(routes: list[list[tuple[int, float]]], num_experts: int) -> list[int]:
    counts = [0] * num_experts
    for token in routes:
        for e, _ in token:
            if not 0 <= e < num_experts:
                raise ValueError(f"专家编号 {e} 越界")
            counts[e] += 1
    return counts
