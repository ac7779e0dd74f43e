"""022 的可见测试。"""

import math

from solution import candidates, sampling_probs


def _close(got, want):
    assert len(got) == len(want), f"长度不对：{got!r}"
    for g, w in zip(got, want):
        assert abs(g - w) <= 1e-9, f"{got!r} 和 {want!r} 不够接近"


def test_top_p_example():
    assert candidates([0.1, 0.5, 0.15, 0.25], -1, 0.7) == [1, 3]


def test_top_k_example():
    assert candidates([0.1, 0.5, 0.15, 0.25], 3, 1.0) == [1, 3, 2]


def test_best_token_always_kept():
    assert candidates([0.95, 0.05], 0, 0.9) == [0]


def test_greedy_is_one_hot():
    assert sampling_probs([1.0, 3.0, 2.0], 0.0, -1, 1.0) == [0.0, 1.0, 0.0]


def test_uniform():
    _close(sampling_probs([0.0, 0.0], 1.0, -1, 1.0), [0.5, 0.5])


def test_top_k_renormalizes():
    got = sampling_probs([0.0, math.log(2), math.log(5), math.log(2)], 1.0, 2, 1.0)
    _close(got, [0.0, 2 / 7, 5 / 7, 0.0])
