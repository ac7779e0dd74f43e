"""056 的隐藏测试：和 statistics.quantiles 对照、不改输入、参数检查、TPOT 的分母、汇总。"""

import random
import statistics

from solution import percentile, request_metrics, summarize


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


def close(a, b, tol=1e-12):
    return abs(a - b) <= tol * max(1.0, abs(b))


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def test_matches_statistics_inclusive():
    rng = random.Random(56)
    for _ in range(50):
        n = rng.randint(2, 60)
        xs = [rng.uniform(-5, 50) for _ in range(n)]
        cuts = statistics.quantiles(xs, n=100, method="inclusive")  # p1 .. p99
        for q in (1, 10, 25, 50, 90, 99):
            assert close(percentile(xs, q), cuts[q - 1], 1e-9), (n, q)


def test_fractional_q():
    xs = list(range(1001))
    assert close(percentile([float(x) for x in xs], 99.9), 999.0)
    assert close(percentile([0.0, 1.0], 12.5), 0.125)


def test_duplicates_and_negative():
    assert same(percentile([2.0, 2.0, 2.0], 73), 2.0)
    assert close(percentile([-3.0, -1.0], 50), -2.0)


def test_does_not_modify_input():
    xs = [5.0, 1.0, 4.0, 2.0]
    percentile(xs, 90)
    assert same(xs, [5.0, 1.0, 4.0, 2.0])
    t = (3.0, 1.0, 2.0)
    assert same(percentile(t, 50), 2.0)


def test_p0_and_p100_are_min_and_max():
    rng = random.Random(1)
    for n in (1, 2, 3, 17):
        xs = [rng.random() for _ in range(n)]
        assert same(percentile(xs, 0), min(xs))
        assert same(percentile(xs, 100), max(xs))


def test_not_nearest_rank():
    # 官方客户端的 xs[int(n * q / 100)] 在这里给 4.0
    xs = [1.0, 2.0, 3.0, 4.0]
    assert close(percentile(xs, 99), 3.97)
    assert close(percentile(xs, 25), 1.75)


def test_rejects_bad_input():
    assert raises(percentile, [], 50)
    assert raises(percentile, [1.0], -1)
    assert raises(percentile, [1.0], 100.5)


def test_tpot_divides_by_tokens_minus_one():
    ttft, tpot, latency = request_metrics(1.0, [1.5, 2.0, 2.5, 3.0, 3.5], 5)
    assert close(ttft, 0.5) and close(tpot, 0.5) and close(latency, 2.5)
    # 一段文本里可以有好几个 token：分母是 token 数而不是段数
    _, tpot, _ = request_metrics(0.0, [0.1, 0.9], 9)
    assert close(tpot, 0.1)


def test_single_token_request():
    assert same(request_metrics(2.0, [2.25], 1), (0.25, 0.0, 0.25))


def test_request_metrics_rejects_bad_input():
    assert raises(request_metrics, 0.0, [], 3)
    assert raises(request_metrics, 0.0, [0.1], 0)
    assert raises(request_metrics, 0.0, [0.3, 0.2], 2)
    assert raises(request_metrics, 1.0, [0.5, 1.5], 2)


def test_summarize():
    reqs = [
        (0.0, [0.1, 0.2, 0.3], 3),  # ttft 0.1, tpot 0.1, latency 0.3
        (0.0, [0.3, 0.5], 2),  # ttft 0.3, tpot 0.2, latency 0.5
        (1.0, [1.2, 1.2, 1.6], 5),  # ttft 0.2, tpot 0.1, latency 0.6
    ]
    s = summarize(reqs)
    assert same(set(s), {"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "latency_p50"})
    assert close(s["ttft_p50"], 0.2)
    assert close(s["ttft_p99"], 0.2 + 0.1 * 0.98)
    assert close(s["tpot_p50"], 0.1)
    assert close(s["tpot_p99"], 0.1 + 0.1 * 0.98)
    assert close(s["latency_p50"], 0.5)
    assert raises(summarize, [])
