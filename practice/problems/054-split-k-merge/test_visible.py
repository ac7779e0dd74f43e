"""054 的可见测试：题面里的示例。"""

import math

from solution import merge, split_length, split_ranges

NAN, INF = float("nan"), float("inf")


def test_split_length_examples():
    assert split_length(20, 8, 32) == 32
    assert split_length(257, 8, 32) == 64


def test_split_ranges_examples():
    assert split_ranges(20, 8, 32) == [(0, 20)] + [None] * 7
    assert split_ranges(257, 8, 32) == [
        (0, 64),
        (64, 128),
        (128, 192),
        (192, 256),
        (256, 257),
        None,
        None,
        None,
    ]


def test_merge_examples():
    out, lse = merge([([1.0], 0.0), ([3.0], 0.0)])
    assert abs(out[0] - 2.0) < 1e-12 and abs(lse - math.log(2)) < 1e-12
    assert merge([([5.0], 1000.0), ([NAN], -INF)]) == ([5.0], 1000.0)
