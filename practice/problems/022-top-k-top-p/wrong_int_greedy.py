"""错误答案：贪心时返回 [0, 1, 0] 这样的 int。0 == 0.0、1 == 1.0，只比 == 看不出来。"""

from __future__ import annotations

import math


def _check_top_p(top_p: float) -> None:
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p 必须在 (0, 1] 里，得到 {top_p}")


def candidates(probs: list[float], top_k: int, top_p: float) -> list[int]:
    if not probs:
        raise ValueError("probs 不能为空")
    _check_top_p(top_p)
    # 概率从大到小；相同时编号小的在前（按 (-概率, 编号) 升序排）
    order = sorted(range(len(probs)), key=lambda i: (-probs[i], i))
    kept: list[int] = []
    before = 0.0  # 排在当前 token 前面的概率之和
    for rank, token in enumerate(order):
        if (top_k > 0 and rank >= top_k) or before >= top_p:
            break  # 两个条件都只会越来越难满足：后面的 token 也不会留下
        kept.append(token)
        before += probs[token]
    return kept


def sampling_probs(
    logits: list[float], temperature: float, top_k: int, top_p: float
) -> list[float]:
    if not logits:
        raise ValueError("logits 不能为空")
    _check_top_p(top_p)
    n = len(logits)
    if temperature <= 0 or top_k == 1:
        best = max(range(n), key=lambda i: (logits[i], -i))  # 最大的 logit，相同时编号最小
        return [1 if i == best else 0 for i in range(n)]  # 错在这里：应当是 1.0 和 0.0
    scaled = [x / temperature for x in logits]
    top = max(scaled)
    exps = [math.exp(x - top) for x in scaled]  # 最大的指数是 0：不会溢出
    total = sum(exps)
    probs = [e / total for e in exps]
    keep = candidates(probs, top_k, top_p)
    mass = sum(probs[i] for i in keep)
    out = [0.0] * n
    for i in keep:
        out[i] = probs[i] / mass
    return out
