"""练习 053：online softmax——一块一块地算注意力。"""

from __future__ import annotations

from collections.abc import Sequence


class OnlineSoftmax:
    """维护到目前为止的最大值 m、分母 l、分子 acc；update 一次消化一块分数和值。"""

    def __init__(self, dim: int) -> None:
        raise NotImplementedError("在这里初始化 m、l、acc")

    def update(self, scores: Sequence[float], values: Sequence[Sequence[float]]) -> None:
        """消化一块：分数可以是 -inf（被遮住）；整块都是 -inf 时不能产生 nan。"""
        raise NotImplementedError("在这里实现 update")

    def result(self) -> list[float]:
        """acc / l；还没有可见的分数时抛 ValueError。"""
        raise NotImplementedError("在这里实现 result")

    def lse(self) -> float:
        """log-sum-exp = m + log(l)；没有可见的分数时是 -inf。"""
        raise NotImplementedError("在这里实现 lse")


def blocked_attention(
    scores: Sequence[float], values: Sequence[Sequence[float]], block: int
) -> list[float]:
    """按 block 个一块依次 update，返回结果。"""
    raise NotImplementedError("在这里实现 blocked_attention")
