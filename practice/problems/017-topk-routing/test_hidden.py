"""017 的隐藏测试：大打分不溢出、并列的顺序、k 取满、非法参数、各专家的负载。"""

import math

from solution import expert_load, route


def same(actual, expected):
    """类型和取值都一致才算对：type 逐层相同（list/tuple/dict 递归进去），最后才比 ==。

    只比 == 的话，返回 1 冒充 1.0、True 冒充 1，或者返回一个和谁比都相等的对象，都能蒙混过关。
    """
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(expected, dict):
        keys_match = actual.keys() == expected.keys()
        return keys_match and all(same(actual[k], expected[k]) for k in expected)
    return bool(expected == actual)


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
    assert same([e for e, _ in got], [1, 2])
    assert abs(got[0][1] - 1 / (1 + math.exp(-1))) < 1e-12


def test_ties_prefer_the_smaller_index():
    assert same([e for e, _ in route([3.0, 5.0, 5.0, 5.0], 2, True)], [1, 2])
    assert same([e for e, _ in route([1.0, 1.0, 1.0, 1.0], 3, False)], [0, 1, 2])


def test_without_renormalize_weights_are_the_softmax_probabilities():
    logits = [0.5, -1.0, 2.5, 0.0, 1.5]
    total = sum(math.exp(x) for x in logits)
    got = route(logits, 3, renormalize=False)
    assert same([e for e, _ in got], [2, 4, 0])
    for e, w in got:
        assert abs(w - math.exp(logits[e]) / total) < 1e-12
    assert sum(w for _, w in got) < 1


def test_renormalized_weights_sum_to_one_and_keep_ratios():
    logits = [0.5, -1.0, 2.5, 0.0, 1.5]
    plain = route(logits, 3, renormalize=False)
    renorm = route(logits, 3, renormalize=True)
    assert same([e for e, _ in renorm], [e for e, _ in plain])  # 重新归一化不改变选谁
    assert abs(sum(w for _, w in renorm) - 1) < 1e-12
    assert abs(renorm[0][1] / renorm[1][1] - plain[0][1] / plain[1][1]) < 1e-9


def test_k_equals_the_number_of_experts():
    got = route([0.1, 0.2, 0.3], 3, renormalize=False)
    assert same([e for e, _ in got], [2, 1, 0])
    assert abs(sum(w for _, w in got) - 1) < 1e-12


def test_weights_are_sorted_descending():
    got = route([0.3, -0.2, 1.1, 0.9, 1.0, -3.0], 4, renormalize=False)
    weights = [w for _, w in got]
    assert same(weights, sorted(weights, reverse=True))


def test_invalid_arguments():
    _raises_value_error(route, [], 1, True)
    _raises_value_error(route, [1.0, 2.0], 0, True)
    _raises_value_error(route, [1.0, 2.0], 3, False)
    _raises_value_error(expert_load, [[(4, 1.0)]], 4)
    _raises_value_error(expert_load, [[(-1, 1.0)]], 4)


def test_expert_load_counts_every_choice():
    routes = [route(row, 2, True) for row in ([0, 1, 2], [2, 1, 0], [0, 5, 1], [9, 0, 8])]
    assert same(expert_load(routes, 3), [2, 3, 3])
    assert same(expert_load([], 3), [0, 0, 0])


def test_result_is_a_list_of_int_float_tuples():
    # route 返回 list，每一项是 (int, float) 的元组；expert_load 返回 int 的列表
    for logits, k, renorm in [
        ([0.0, 2.0, 1.0, -1.0], 2, False),
        ([5.0], 1, True),
        ([1, 3, 2], 3, True),
    ]:
        got = route(logits, k, renorm)
        assert type(got) is list and len(got) == k, got
        for item in got:
            assert type(item) is tuple and len(item) == 2, f"每一项应是 (编号, 权重) 元组：{item!r}"
            assert type(item[0]) is int and type(item[1]) is float, item
    assert same(route([5.0], 1, False), [(0, 1.0)])
    assert same(expert_load([[(1, 0.7), (2, 0.3)], [(1, 0.6), (0, 0.4)]], 4), [1, 2, 1, 0])
    assert same(expert_load([[(0, 1.0)]], 1), [1])
