"""017 的可见测试。"""

import math

from solution import expert_load, route


def _close(a, b):
    return abs(a - b) < 1e-9


def test_example_without_renormalize():
    got = route([0.0, 2.0, 1.0, -1.0], 2, renormalize=False)
    assert [e for e, _ in got] == [1, 2]
    total = sum(math.exp(x) for x in [0.0, 2.0, 1.0, -1.0])
    assert _close(got[0][1], math.exp(2.0) / total)
    assert _close(got[1][1], math.exp(1.0) / total)


def test_example_with_renormalize():
    got = route([0.0, 2.0, 1.0, -1.0], 2, renormalize=True)
    assert [e for e, _ in got] == [1, 2]
    assert _close(sum(w for _, w in got), 1.0)
    assert _close(got[0][1], math.exp(2.0) / (math.exp(2.0) + math.exp(1.0)))


def test_expert_load_example():
    assert expert_load([[(1, 0.7), (2, 0.3)], [(1, 0.6), (0, 0.4)]], 4) == [1, 2, 1, 0]
