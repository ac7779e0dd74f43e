"""022 的隐藏测试：并列、恰好到 top_p、top-p 用全体概率、贪心的各种写法、数值稳定、非法参数。"""

import math

from solution import candidates, sampling_probs


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


def _close(got, want):
    assert type(got) is list, f"应返回 list，得到 {type(got).__name__}"
    assert all(type(g) is float for g in got), f"每一项都应是 float：{got!r}"
    assert same(len(got), len(want)), f"长度不对：{got!r}"
    for g, w in zip(got, want):
        assert abs(g - w) <= 1e-9, f"{got!r} 和 {want!r} 不够接近"


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_ties_and_exact_threshold():
    assert same(candidates([0.25, 0.25, 0.5], -1, 0.75), [2, 0])
    assert same(candidates([0.25, 0.25, 0.5], -1, 1.0), [2, 0, 1])
    assert same(candidates([0.25, 0.25, 0.25, 0.25], 2, 1.0), [0, 1])


def test_threshold_is_strict():
    assert same(candidates([0.5, 0.25, 0.25], -1, 0.5), [0])
    assert same(candidates([0.5, 0.25, 0.25], -1, 0.5000001), [0, 1])


def test_top_p_uses_the_full_distribution():
    # top-k 留下前两名（0.4、0.3）；top-p 看的是全体概率：第二名前面的和 0.4 < 0.5，留下。
    # 若先在前两名里重新归一化，第二名前面的和变成 0.571，就被错误地掩掉了
    assert same(candidates([0.4, 0.3, 0.2, 0.1], 2, 0.5), [0, 1])
    got = sampling_probs([math.log(4), math.log(3), math.log(2), 0.0], 1.0, 2, 0.5)
    _close(got, [4 / 7, 3 / 7, 0.0, 0.0])


def test_top_k_zero_or_huge_means_no_limit():
    probs = [0.1, 0.2, 0.3, 0.4]
    assert same(candidates(probs, 0, 1.0), [3, 2, 1, 0])
    assert same(candidates(probs, 100, 1.0), [3, 2, 1, 0])
    assert same(candidates(probs, -5, 1.0), [3, 2, 1, 0])


def test_tiny_top_p_keeps_one():
    assert same(candidates([0.2, 0.3, 0.5], -1, 1e-9), [2])


def test_zero_temperature_with_top_p_is_greedy():
    assert same(sampling_probs([1.0, 3.0, 2.0], 0.0, -1, 0.5), [0.0, 1.0, 0.0])
    assert same(sampling_probs([1.0, 3.0, 2.0], -1.0, -1, 0.9), [0.0, 1.0, 0.0])


def test_top_k_one_is_greedy_at_any_temperature():
    assert same(sampling_probs([0.5, 0.1, 0.5], 5.0, 1, 1.0), [1.0, 0.0, 0.0])
    assert same(sampling_probs([0.5, 0.1, 0.7], 5.0, 1, 0.3), [0.0, 0.0, 1.0])


def test_greedy_tie_picks_smallest_index():
    assert same(sampling_probs([2.0, 7.0, 7.0], 0.0, -1, 1.0), [0.0, 1.0, 0.0])


def test_temperature_flattens_and_sharpens():
    logits = [0.0, math.log(3)]
    _close(sampling_probs(logits, 1.0, -1, 1.0), [0.25, 0.75])
    _close(sampling_probs(logits, 0.5, -1, 1.0), [0.1, 0.9])  # 1 : 9
    got = sampling_probs(logits, 2.0, -1, 1.0)
    _close(got, [1 / (1 + math.sqrt(3)), math.sqrt(3) / (1 + math.sqrt(3))])


def test_numerically_stable():
    _close(sampling_probs([1000.0, 1000.0, 0.0], 1.0, -1, 1.0), [0.5, 0.5, 0.0])
    got = sampling_probs([10.0, 9.0], 0.01, -1, 1.0)  # 除以温度之后是 1000 和 900
    assert got[0] > 0.999999 and got[1] >= 0.0
    _close([sum(got)], [1.0])


def test_top_p_then_renormalize():
    probs_logits = [math.log(0.1), math.log(0.5), math.log(0.15), math.log(0.25)]
    _close(sampling_probs(probs_logits, 1.0, -1, 0.7), [0.0, 2 / 3, 0.0, 1 / 3])


def test_result_is_a_distribution_over_a_prefix_of_the_ranking():
    logits = [0.3, -1.2, 2.5, 0.0, 1.1, -0.4]
    for top_k in (-1, 2, 4):
        for top_p in (0.3, 0.8, 1.0):
            got = sampling_probs(logits, 0.7, top_k, top_p)
            _close([sum(got)], [1.0])
            kept = [i for i, p in enumerate(got) if p > 0]
            dropped = [i for i, p in enumerate(got) if p == 0]
            assert kept, "候选集合不能为空"
            if top_k > 0:
                assert len(kept) <= top_k
            # 留下的一定是 logit 最大的那几个
            assert all(logits[i] > logits[j] for i in kept for j in dropped)


def test_bad_arguments():
    _raises_value_error(candidates, [], -1, 1.0)
    _raises_value_error(candidates, [1.0], -1, 0.0)
    _raises_value_error(candidates, [1.0], -1, 1.5)
    _raises_value_error(sampling_probs, [], 1.0, -1, 1.0)
    _raises_value_error(sampling_probs, [1.0, 2.0], 1.0, -1, 0.0)
    _raises_value_error(sampling_probs, [1.0, 2.0], 0.0, -1, 1.5)
