"""错误答案：用"加上自己之后的累计概率"判断 top-p——越过阈值的那个 token 被丢掉了。"""

from __future__ import annotations

import math


def candidates(probs: list[float], top_k: int, top_p: float) -> list[int]:
    if not probs or not 0.0 < top_p <= 1.0:
        raise ValueError("probs 为空或 top_p 不合法")
    order = sorted(range(len(probs)), key=lambda i: (-probs[i], i))
    kept: list[int] = []
    total = 0.0
    for rank, token in enumerate(order):
        total += probs[token]
        if (top_k > 0 and rank >= top_k) or total > top_p:  # 错在这里：算上了自己
            break
        kept.append(token)
    return kept or order[:1]  # 为了不空，硬塞进第一名


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
    probs = [e / sum(exps) for e in exps]
    keep = candidates(probs, top_k, top_p)
    mass = sum(probs[i] for i in keep)
    return [probs[i] / mass if i in keep else 0.0 for i in range(n)]
