"""错误答案：只有"没有 top-p 截断"时才把温度 0 当作贪心；温度 0 配上 top-p 时除以了 0。"""

from __future__ import annotations

import math


def candidates(probs: list[float], top_k: int, top_p: float) -> list[int]:
    if not probs or not 0.0 < top_p <= 1.0:
        raise ValueError("probs 为空或 top_p 不合法")
    order = sorted(range(len(probs)), key=lambda i: (-probs[i], i))
    kept: list[int] = []
    before = 0.0
    for rank, token in enumerate(order):
        if (top_k > 0 and rank >= top_k) or before >= top_p:
            break
        kept.append(token)
        before += probs[token]
    return kept


def sampling_probs(
    logits: list[float], temperature: float, top_k: int, top_p: float
) -> list[float]:
    if not logits or not 0.0 < top_p <= 1.0:
        raise ValueError("logits 为空或 top_p 不合法")
    n = len(logits)
    if (temperature <= 0 or top_k == 1) and top_p == 1.0:  # 错在这里：多了 top_p == 1.0
        best = max(range(n), key=lambda i: (logits[i], -i))
        return [1.0 if i == best else 0.0 for i in range(n)]
    scaled = [x / temperature for x in logits]
    top = max(scaled)
    exps = [math.exp(x - top) for x in scaled]
    total = sum(exps)
    probs = [e / total for e in exps]
    keep = candidates(probs, top_k, top_p)
    mass = sum(probs[i] for i in keep)
    return [probs[i] / mass if i in keep else 0.0 for i in range(n)]
