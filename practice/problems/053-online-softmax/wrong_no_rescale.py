"""错误答案：最大值变了，却没有把旧的 l、acc 乘上 alpha 换算到新的最大值。

只有最大值出现在第一块时才碰巧对。
"""

from __future__ import annotations

import math
from collections.abc import Sequence

NEG_INF = float("-inf")


class OnlineSoftmax:
    """维护到目前为止的最大值 m、分母 l、分子 acc；update 一次消化一块分数和值。"""

    def __init__(self, dim: int) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.m = NEG_INF
        self.l = 0.0
        self.acc = [0.0] * dim

    def update(self, scores: Sequence[float], values: Sequence[Sequence[float]]) -> None:
        """消化一块：分数可以是 -inf（被遮住）；整块都是 -inf 时不能产生 nan。"""
        if len(scores) != len(values):
            raise ValueError("scores and values must have the same length")
        if any(len(v) != self.dim for v in values):
            raise ValueError(f"every value vector must have length {self.dim}")
        if not scores:
            return
        m_new = max(self.m, max(scores))
        safe = 0.0 if m_new == NEG_INF else m_new  # 到现在为止全被遮住：别算 -inf - (-inf)
        p = [math.exp(s - safe) for s in scores]
        self.l = self.l + sum(p)
        acc = list(self.acc)
        for pi, v in zip(p, values):
            for d in range(self.dim):
                acc[d] += pi * v[d]
        self.acc = acc
        self.m = m_new

    def result(self) -> list[float]:
        """acc / l；还没有可见的分数时抛 ValueError。"""
        if self.l == 0:
            raise ValueError("no visible score yet")
        return [a / self.l for a in self.acc]

    def lse(self) -> float:
        """log-sum-exp = m + log(l)；没有可见的分数时是 -inf。"""
        if self.l == 0:
            return NEG_INF
        return self.m + math.log(self.l)


def blocked_attention(
    scores: Sequence[float], values: Sequence[Sequence[float]], block: int
) -> list[float]:
    """按 block 个一块依次 update，返回结果。"""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    if len(scores) != len(values):
        raise ValueError("scores and values must have the same length")
    if not values:
        raise ValueError("no scores")
    state = OnlineSoftmax(len(values[0]))
    for i in range(0, len(scores), block):
        state.update(scores[i : i + block], values[i : i + block])
    return state.result()
