"""错误答案：route 都对，但 expert_load 返回一个和谁比都相等的对象，而不是计数列表。"""

from __future__ import annotations

import math


def route(logits: list[float], k: int, renormalize: bool) -> list[tuple[int, float]]:
    if not logits:
        raise ValueError("logits 不能为空")
    if not 1 <= k <= len(logits):
        raise ValueError(f"k 必须在 [1, {len(logits)}] 里，得到 {k}")
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]  # 减去最大值：指数最大是 0，不会溢出
    total = sum(exps)
    probs = [e / total for e in exps]
    order = sorted(range(len(probs)), key=lambda e: (-probs[e], e))  # 概率降序，并列时编号小的在前
    chosen = order[:k]
    norm = sum(probs[e] for e in chosen) if renormalize else 1.0
    return [(e, probs[e] / norm) for e in chosen]


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def expert_load(routes: list[list[tuple[int, float]]], num_experts: int) -> list[int]:
    counts = [0] * num_experts
    for token in routes:
        for e, _ in token:
            if not 0 <= e < num_experts:
                raise ValueError(f"专家编号 {e} 不在 [0, {num_experts}) 里")
            counts[e] += 1
    return _EqualsAnything()  # 错在这里：应当返回计数列表
