"""017 的隐藏测试：大打分不溢出、并列的顺序、k 取满、非法参数、各专家的负载。"""

import math

from solution import expert_load, route


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_large_logits_do_not_overflow():
    got = route([1000.0, 1000.0, 0.0], 1, renormalize=False)
    assert got[0][0] == 0 and abs(got[0][1] - 0.5) < 1e-12
    got = route([-2000.0, 800.0, 799.0], 2, renormalize=False)
    assert [e for e, _ in got] == [1, 2]
    assert abs(got[0][1] - 1 / (1 + math.exp(-1))) < 1e-12


def test_ties_prefer_the_smaller_index():
    assert [e for e, _ in route([3.0, 5.0, 5.0, 5.0], 2, True)] == [1, 2]
    assert [e for e, _ in route([1.0, 1.0, 1.0, 1.0], 3, False)] == [0, 1, 2]


def test_without_renormalize_weights_are_the_softmax_probabilities():
    logits = [0.5, -1.0, 2.5, 0.0, 1.5]
    total = sum(math.exp(x) for x in logits)
    got = route(logits, 3, renormalize=False)
    assert [e for e, _ in got] == [2, 4, 0]
    for e, w in got:
        assert abs(w - math.exp(logits[e]) / total) < 1e-12
    assert sum(w for _, w in got) < 1


def test_renormalized_weights_sum_to_one_and_keep_ratios():
    logits = [0.5, -1.0, 2.5, 0.0, 1.5]
    plain = route(logits, 3, renormalize=False)
    renorm = route(logits, 3, renormalize=True)
    assert [e for e, _ in renorm] == [e for e, _ in plain]  # 重新归一化不改变选谁
    assert abs(sum(w for _, w in renorm) - 1) < 1e-12
    assert abs(renorm[0][1] / renorm[1][1] - plain[0][1] / plain[1][1]) < 1e-9


def test_k_equals_the_number_of_experts():
    got = route([0.1, 0.2, 0.3], 3, renormalize=False)
    assert [e for e, _ in got] == [2, 1, 0]
    assert abs(sum(w for _, w in got) - 1) < 1e-12


def test_weights_are_sorted_descending():
    got = route([0.3, -0.2, 1.1, 0.9, 1.0, -3.0], 4, renormalize=False)
    weights = [w for _, w in got]
    assert weights == sorted(weights, reverse=True)


def test_invalid_arguments():
    _raises_value_error(route, [], 1, True)
    _raises_value_error(route, [1.0, 2.0], 0, True)
    _raises_value_error(route, [1.0, 2.0], 3, False)
    _raises_value_error(expert_load, [[(4, 1.0)]], 4)
    _raises_value_error(expert_load, [[(-1, 1.0)]], 4)


def test_expert_load_counts_every_choice():
    routes = [route(row, 2, True) for row in ([0, 1, 2], [2, 1, 0], [0, 5, 1], [9, 0, 8])]
    assert expert_load(routes, 3) == [2, 3, 3]
    assert expert_load([], 3) == [0, 0, 0]
