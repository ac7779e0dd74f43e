"""错误答案：把 (概率, 编号) 从大到小排序，概率并列时编号大的排到了前面。"""

from __future__ import annotations

import math


def route(logits: list[float], k: int, renormalize: bool) -> list[tuple[int, float]]:
    if not logits or not 1 <= k <= len(logits):
        raise ValueError(f"logits={logits!r}, k={k}")
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    probs = [e / total for e in exps]
    pairs = sorted(((p, e) for e, p in enumerate(probs)), reverse=True)  # 错在这里
    chosen = [e for _, e in pairs[:k]]
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
