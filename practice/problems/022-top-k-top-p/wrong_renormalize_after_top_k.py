"""错误答案：先按 top-k 截断、重新归一化，再在新的概率上做 top-p。"""

from __future__ import annotations

import math


def candidates(probs: list[float], top_k: int, top_p: float) -> list[int]:
    if not probs or not 0.0 < top_p <= 1.0:
        raise ValueError("probs 为空或 top_p 不合法")
    order = sorted(range(len(probs)), key=lambda i: (-probs[i], i))
    if top_k > 0:
        order = order[:top_k]
    mass = sum(probs[i] for i in order)  # 错在这里：top-p 应当看全体 token 的概率
    kept: list[int] = []
    before = 0.0
    for token in order:
        if before >= top_p:
            break
        kept.append(token)
        before += probs[token] / mass
    return kept


def sampling_probs(
    logits: list[float], temperature: float, top_k: int, top_p: float
) -> list[float]:
    if not logits or not 0.0 < top_p <= 1.0:
        raise ValueError("logits 为空或 top_p 不合法")
    n = len(logits)
    if temperature <= 0 or top_k == 1:
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
