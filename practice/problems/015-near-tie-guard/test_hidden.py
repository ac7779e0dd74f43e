"""015 的隐藏测试：并列的第一名、阈值的边界、参照答案比我们长或短、停下那一步的误差、参数检查。"""

from solution import Comparison, compare_greedy


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


def _check(got, compared, max_diff, stop, step):
    assert type(got) is Comparison, f"应返回 Comparison，得到 {type(got).__name__}"
    assert same((got.compared, got.stop, got.step), (compared, stop, step)), got
    assert type(got.max_diff) is float, f"max_diff 应是 float，得到 {got.max_diff!r}"
    assert abs(got.max_diff - max_diff) < 1e-9, got


def _raises_value_error(func, *args, **kwargs):
    try:
        value = func(*args, **kwargs)
    except ValueError:
        return
    raise AssertionError(f"应当抛出 ValueError，实际返回了 {value!r}")


def test_exact_tie_is_a_near_tie():
    # 最大值出现两次：margin 是 0，不是"第一名减去比它小的第二个值"
    ref = [[1.0, 7.0, 7.0, 0.0]]
    _check(compare_greedy([1], ref, ref), 0, 0.0, "near_tie", 0)
    _check(compare_greedy([2], ref, ref), 0, 0.0, "near_tie", 0)


def test_margin_equal_to_threshold_stops():
    ref = [[0.0, 0.5], [0.0, 2.0]]
    _check(compare_greedy([1, 1], ref, ref, threshold=0.5), 0, 0.0, "near_tie", 0)
    _check(compare_greedy([1, 1], ref, ref, threshold=0.4999), 2, 0.0, "end", 2)


def test_margin_comes_from_the_reference():
    # 我们自己的第一名领先很多，但参照答案是 near-tie：停下
    ref = [[3.0, 3.0002, 0.0]]
    ours = [[1.0, 3.0, 0.0]]
    _check(compare_greedy([1], ours, ref), 0, 2.0, "near_tie", 0)
    # 反过来：我们是 near-tie、参照答案不是，照常比较
    ref2 = [[0.0, 3.0, 1.0]]
    ours2 = [[0.0, 3.0, 2.9999]]
    _check(compare_greedy([1], ours2, ref2), 1, 1.9999, "end", 1)


def test_does_not_continue_after_a_near_tie():
    ref = [[0.0, 4.0], [1.0, 1.0], [5.0, 0.0], [5.0, 0.0]]
    ours = [[0.0, 4.0], [1.0, 1.0], [0.0, 5.0], [5.0, 0.0]]
    _check(compare_greedy([1, 0, 1, 0], ours, ref), 1, 0.0, "near_tie", 1)


def test_diff_of_the_stopping_step_counts():
    ref = [[0.0, 4.0], [0.0, 4.0], [0.0, 4.0]]
    ours = [[0.0, 4.0], [0.25, 4.0], [9.0, 4.0]]
    _check(compare_greedy([1, 0, 1], ours, ref), 1, 0.25, "mismatch", 1)


def test_negative_logits_and_argmax_position():
    ref = [[-3.0, -1.0, -2.0], [-0.5, -4.0, -9.0]]
    _check(compare_greedy([1, 0], ref, ref), 2, 0.0, "end", 2)
    _check(compare_greedy([2, 0], ref, ref), 0, 0.0, "mismatch", 0)


def test_reference_shorter_or_longer():
    ref = [[0.0, 4.0], [4.0, 0.0], [0.0, 4.0]]
    _check(compare_greedy([1, 0], ref[:2], ref), 2, 0.0, "end", 2)
    _check(compare_greedy([1, 0, 1], ref, ref[:1]), 1, 0.0, "end", 1)
    _check(compare_greedy([], [], ref), 0, 0.0, "end", 0)


def test_max_diff_over_many_steps():
    ref = [[0.0, 10.0, float(k)] for k in range(6)]
    ours = [[0.001 * k, 10.0, float(k)] for k in range(6)]
    _check(compare_greedy([1] * 6, ours, ref), 6, 0.005, "end", 6)


def test_bad_inputs():
    ref = [[0.0, 1.0], [1.0, 0.0]]
    _raises_value_error(compare_greedy, [1], ref, ref)
    _raises_value_error(compare_greedy, [1, 0], [[0.0, 1.0], [1.0]], ref)
    _raises_value_error(compare_greedy, [0], [[1.0]], [[1.0]])
