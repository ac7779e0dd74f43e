"""053 的隐藏测试：和两遍的 softmax 比、各种块大小、遮住的块在开头/中间/结尾、lse、参数检查。"""

import math
import random

from solution import OnlineSoftmax, blocked_attention


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


INF = float("inf")


def two_pass(scores, values):
    m = max(scores)
    w = [math.exp(s - m) for s in scores]
    total = sum(w)
    dim = len(values[0])
    return [sum(wi * v[d] for wi, v in zip(w, values)) / total for d in range(dim)]


def close(a, b, tol=1e-9):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


def no_nan(o):
    return not math.isnan(o.m) and not math.isnan(o.l) and not any(math.isnan(a) for a in o.acc)


def test_matches_two_pass_for_every_block_size():
    rng = random.Random(53)
    for _ in range(60):
        n = rng.randint(1, 40)
        dim = rng.randint(1, 5)
        scores = [rng.uniform(-8, 8) for _ in range(n)]
        values = [[rng.uniform(-3, 3) for _ in range(dim)] for _ in range(n)]
        want = two_pass(scores, values)
        for block in (1, 2, 3, 7, 16, 64):
            assert close(blocked_attention(scores, values, block), want), (n, block)


def test_increasing_scores_need_rescaling():
    scores = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    values = [[float(i)] for i in range(6)]
    assert close(blocked_attention(scores, values, 2), two_pass(scores, values))


def test_masked_blocks_anywhere():
    rng = random.Random(7)
    for _ in range(40):
        n = rng.randint(4, 30)
        scores = [rng.uniform(-4, 4) for _ in range(n)]
        values = [[rng.uniform(-1, 1), rng.uniform(-1, 1)] for _ in range(n)]
        for i in range(n):
            if rng.random() < 0.5:
                scores[i] = -INF
        scores[rng.randrange(n)] = rng.uniform(-4, 4)  # 至少一个可见
        visible = [(s, v) for s, v in zip(scores, values) if s != -INF]
        want = two_pass([s for s, _ in visible], [v for _, v in visible])
        for block in (1, 2, 4):
            assert close(blocked_attention(scores, values, block), want)


def test_first_blocks_fully_masked_no_nan():
    o = OnlineSoftmax(3)
    for _ in range(3):
        o.update([-INF] * 4, [[1.0, 2.0, 3.0]] * 4)
        assert no_nan(o) and o.m == -INF and o.l == 0.0 and o.acc == [0.0, 0.0, 0.0]
        assert same(o.lse(), -INF)
    o.update([2.0, -INF], [[1.0, 1.0, 1.0], [7.0, 7.0, 7.0]])
    o.update([-INF, -INF], [[5.0, 5.0, 5.0]] * 2)  # 中间一块全遮住：m 有限，不变
    assert no_nan(o) and o.m == 2.0
    assert close(o.result(), [1.0, 1.0, 1.0])
    assert abs(o.lse() - 2.0) < 1e-12


def test_huge_and_tiny_scores():
    scores = [1000.0, 999.0, -1000.0, 500.0]
    values = [[1.0], [2.0], [3.0], [4.0]]
    for block in (1, 2, 4):
        assert close(blocked_attention(scores, values, block), two_pass(scores, values))
    o = OnlineSoftmax(1)
    o.update([1000.0, 1000.0], [[0.0], [0.0]])
    assert abs(o.lse() - (1000.0 + math.log(2))) < 1e-9


def test_lse_is_log_sum_exp():
    rng = random.Random(1)
    scores = [rng.uniform(-5, 5) for _ in range(17)]
    o = OnlineSoftmax(1)
    for i in range(0, 17, 5):
        o.update(scores[i : i + 5], [[0.0]] * len(scores[i : i + 5]))
    assert abs(o.lse() - math.log(sum(math.exp(s) for s in scores))) < 1e-9


def test_empty_update_changes_nothing():
    o = OnlineSoftmax(2)
    o.update([], [])
    assert o.m == -INF and o.l == 0.0 and o.acc == [0.0, 0.0]
    o.update([0.5], [[1.0, -1.0]])
    o.update([], [])
    assert same(o.result(), [1.0, -1.0])


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def test_bad_arguments():
    assert raises(OnlineSoftmax, 0)
    o = OnlineSoftmax(2)
    assert raises(o.result)
    assert raises(o.update, [1.0], [])
    assert raises(o.update, [1.0], [[1.0]])
    assert raises(blocked_attention, [1.0], [[1.0]], 0)
    o.update([-INF], [[1.0, 1.0]])
    assert raises(o.result)
