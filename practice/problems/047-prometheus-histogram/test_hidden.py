"""047 的隐藏测试：le 的边界、累计、+Inf、render、插值、非法参数、随机数据。"""

import bisect
import math
import random

from solution import Histogram


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


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def samples(lines):
    return {line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1] for line in lines}


def test_value_equal_to_a_bound_goes_into_that_bucket():
    h = Histogram([1, 2, 4])
    for v in (1, 2, 4):
        h.observe(v)
    assert same(
        h.lines("x")[:4],
        [
            'x_bucket{le="1"} 1',
            'x_bucket{le="2"} 2',
            'x_bucket{le="4"} 3',
            'x_bucket{le="+Inf"} 3',
        ],
    )


def test_counts_are_cumulative():
    h = Histogram([1, 2, 3])
    for v in (0.5, 1.5, 1.6, 2.5, 2.6, 2.7):
        h.observe(v)
    got = [int(line.rsplit(" ", 1)[1]) for line in h.lines("x")[:4]]
    assert same(got, [1, 3, 6, 6])


def test_values_above_every_bound_only_in_inf():
    h = Histogram([0.5])
    h.observe(10)
    h.observe(1e9)
    assert same(
        h.lines("big"),
        [
            'big_bucket{le="0.5"} 0',
            'big_bucket{le="+Inf"} 2',
            "big_sum 1000000010.000000",
            "big_count 2",
        ],
    )


def test_zero_and_negative_values_go_into_the_first_bucket():
    h = Histogram([0.25, 2.5])
    h.observe(0)
    h.observe(-3)
    s = samples(h.lines("t"))
    assert s['t_bucket{le="0.25"}'] == "2" and s["t_sum"] == "-3.000000"


def test_empty_histogram_lines():
    assert same(
        Histogram([0.005, 0.25, 10, 300]).lines("e"),
        [
            'e_bucket{le="0.005"} 0',
            'e_bucket{le="0.25"} 0',
            'e_bucket{le="10"} 0',
            'e_bucket{le="300"} 0',
            'e_bucket{le="+Inf"} 0',
            "e_sum 0.000000",
            "e_count 0",
        ],
    )


def test_render_has_help_type_and_trailing_newline():
    h = Histogram([1])
    h.observe(0.5)
    assert same(
        h.render("lat", "请求用时。"),
        (
            "# HELP lat 请求用时。\n"
            "# TYPE lat histogram\n"
            'lat_bucket{le="1"} 1\n'
            'lat_bucket{le="+Inf"} 1\n'
            "lat_sum 0.500000\n"
            "lat_count 1\n"
        ),
    )


def test_bad_buckets_rejected():
    assert raises(Histogram, [])
    assert raises(Histogram, [1, 1])
    assert raises(Histogram, [2, 1])
    assert raises(Histogram, [0, 1])
    assert raises(Histogram, [-1, 1])
    assert raises(Histogram, [1, float("inf")])
    assert raises(Histogram, [float("nan")])
    assert not raises(Histogram, [0.001, 1, 1000])


def test_quantile_arguments():
    h = Histogram([1])
    assert h.quantile(0.5) is None  # 没有观测值
    h.observe(0.5)
    assert raises(h.quantile, 0)
    assert raises(h.quantile, -0.1)
    assert raises(h.quantile, 1.5)


def test_quantile_interpolates_from_the_lower_bound():
    h = Histogram([1, 2, 4, 8])
    for v in (0.5, 3, 3, 3, 3, 7, 7, 7):  # 每格：1, 0, 4, 3
        h.observe(v)
    assert math.isclose(h.quantile(0.125), 1.0)  # rank 1：第一格满了，正好是它的上界
    assert math.isclose(h.quantile(0.25), 2.5)  # rank 2：(2, 4] 格，2 + 2 × 1/4
    assert math.isclose(h.quantile(0.5), 3.5)  # rank 4：2 + 2 × 3/4
    assert math.isclose(h.quantile(0.75), 4 + 4 * 1 / 3)  # rank 6：(4, 8] 格
    assert math.isclose(h.quantile(1.0), 8.0)


def test_quantile_in_the_inf_bucket_is_the_largest_finite_bound():
    h = Histogram([0.1, 0.2])
    for v in (0.05, 5, 6, 7):
        h.observe(v)
    assert same(h.quantile(0.5), 0.2)
    assert same(h.quantile(0.99), 0.2)
    assert math.isclose(h.quantile(0.25), 0.1)


def test_quantile_skips_empty_buckets():
    h = Histogram([1, 2, 3, 4])
    for v in (0.5, 3.5):  # 第二、三格是空的
        h.observe(v)
    assert math.isclose(h.quantile(0.5), 1.0)
    assert math.isclose(h.quantile(0.75), 3.5)  # rank 1.5：(3, 4] 格，3 + 1 × 0.5


def test_random_data_against_a_direct_count():
    rng = random.Random(47)
    for _ in range(50):
        bounds = sorted({round(rng.uniform(0.01, 50), 2) for _ in range(rng.randint(1, 8))})
        values = [round(rng.uniform(-5, 60), 3) for _ in range(rng.randint(0, 60))]
        h = Histogram(bounds)
        for v in values:
            h.observe(v)
        s = samples(h.lines("r"))
        previous = 0
        for b in bounds:
            n = int(s[f'r_bucket{{le="{b:g}"}}'])
            assert same(n, sum(v <= b for v in values)), (bounds, values)
            assert n >= previous
            previous = n
        assert int(s['r_bucket{le="+Inf"}']) == int(s["r_count"]) == len(values)
        assert same(s["r_sum"], f"{sum(values):.6f}")
        if values:
            q = rng.choice([0.1, 0.5, 0.9, 0.99])
            rank = q * len(values)
            est = h.quantile(q)
            cum = [sum(v <= b for v in values) for b in bounds]
            i = bisect.bisect_left(cum, rank)
            if i == len(bounds):
                assert same(est, bounds[-1])
            else:
                lo = bounds[i - 1] if i else 0.0
                assert lo <= est <= bounds[i], (bounds, values, q, est)
