"""047 的可见测试：题面里的示例。"""

import math

from solution import Histogram


def example():
    h = Histogram([0.1, 0.5, 1])
    for v in (0.05, 0.1, 0.3, 0.5, 2.0):
        h.observe(v)
    return h


def test_lines_of_the_example():
    assert example().lines("req_seconds") == [
        'req_seconds_bucket{le="0.1"} 2',
        'req_seconds_bucket{le="0.5"} 4',
        'req_seconds_bucket{le="1"} 4',
        'req_seconds_bucket{le="+Inf"} 5',
        "req_seconds_sum 2.950000",
        "req_seconds_count 5",
    ]


def test_quantiles_of_the_example():
    h = example()
    assert math.isclose(h.quantile(0.5), 0.2)
    assert math.isclose(h.quantile(0.2), 0.05)
    assert h.quantile(1.0) == 1


def test_empty_buckets_rejected():
    try:
        Histogram([])
    except ValueError:
        return
    raise AssertionError("没有上界时应当抛 ValueError")
