"""053 的可见测试：题面里的示例。"""

import math

from solution import OnlineSoftmax, blocked_attention

INF = float("inf")


def test_two_equal_scores():
    o = OnlineSoftmax(1)
    o.update([0.0], [[1.0]])
    o.update([0.0], [[3.0]])
    assert abs(o.result()[0] - 2.0) < 1e-12
    assert abs(o.lse() - math.log(2)) < 1e-12


def test_fully_masked_first_block():
    o = OnlineSoftmax(2)
    o.update([-INF, -INF], [[9.0, 9.0], [9.0, 9.0]])
    assert o.m == -INF and o.l == 0.0
    o.update([1.0, -INF], [[1.0, 2.0], [5.0, 5.0]])
    assert o.result() == [1.0, 2.0]


def test_large_scores_do_not_overflow():
    assert blocked_attention([1000.0, 1000.0], [[0.0], [2.0]], 1) == [1.0]
