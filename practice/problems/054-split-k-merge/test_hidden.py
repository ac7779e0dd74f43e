"""054 的隐藏测试：段长的取整、空段、和直接 softmax 比、分层合并、大 lse、参数检查。"""

import math
import random

from solution import merge, split_k_attention, split_length, split_ranges


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


NAN, INF = float("nan"), float("inf")


def direct(scores, values):
    m = max(scores)
    w = [math.exp(s - m) for s in scores]
    total = sum(w)
    return [sum(wi * v[d] for wi, v in zip(w, values)) / total for d in range(len(values[0]))]


def close(a, b, tol=1e-9):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


def test_split_length_rounds_to_the_block():
    cases = {
        (1, 8, 32): 32,
        (32, 8, 32): 32,
        (256, 8, 32): 32,
        (257, 8, 32): 64,
        (500, 8, 32): 64,
        (512, 8, 32): 64,
        (513, 8, 32): 96,
        (2048, 8, 32): 256,
        (10, 3, 1): 4,
        (10, 1, 4): 12,
        (7, 8, 1): 1,
    }
    for args, want in cases.items():
        assert same(split_length(*args), want), args


def test_ranges_cover_exactly_once_and_start_on_block_boundaries():
    for n in range(1, 700, 7):
        for splits, block in [(8, 32), (4, 16), (3, 1), (8, 1)]:
            ranges = split_ranges(n, splits, block)
            assert same(len(ranges), splits)
            covered = []
            seen_empty = False
            for r in ranges:
                if r is None:
                    seen_empty = True
                    continue
                assert not seen_empty, "空段只会出现在末尾"
                start, end = r
                assert start % block == 0 and start < end <= n
                covered.extend(range(start, end))
            assert same(covered, list(range(n))), (n, splits, block)


def test_which_splits_are_empty():
    assert same(sum(r is None for r in split_ranges(1, 8, 32)), 7)
    assert same(sum(r is None for r in split_ranges(33, 8, 32)), 6)
    assert same(sum(r is None for r in split_ranges(500, 8, 32)), 0)
    assert same(split_ranges(500, 8, 32)[-1], (448, 500))
    assert same(
        split_ranges(100, 8, 4),
        [
            (0, 16),
            (16, 32),
            (32, 48),
            (48, 64),
            (64, 80),
            (80, 96),
            (96, 100),
            None,
        ],
    )


def test_split_k_equals_direct_softmax():
    rng = random.Random(54)
    for _ in range(80):
        n = rng.randint(1, 300)
        dim = rng.randint(1, 4)
        scores = [rng.uniform(-6, 6) for _ in range(n)]
        values = [[rng.uniform(-2, 2) for _ in range(dim)] for _ in range(n)]
        want = direct(scores, values)
        for splits, block in [(8, 32), (8, 1), (3, 16), (1, 32)]:
            assert close(split_k_attention(scores, values, splits, block), want), (n, splits)


def test_merge_weights_by_lse():
    # 第一段分母是第二段的 3 倍
    out, lse = merge([([1.0, 0.0], math.log(3)), ([5.0, 4.0], 0.0)])
    assert close(out, [2.0, 1.0]) and abs(lse - math.log(4)) < 1e-12


def test_empty_splits_are_ignored_even_if_nan():
    out, lse = merge([([NAN, NAN], -INF), ([1.0, 2.0], 0.5), ([NAN, 7.0], -INF)])
    assert out == [1.0, 2.0] and lse == 0.5


def test_large_lse_does_not_overflow():
    out, lse = merge([([1.0], 1000.0), ([3.0], 1000.0), ([9.0], -1000.0)])
    assert close(out, [2.0]) and abs(lse - (1000.0 + math.log(2))) < 1e-9
    scores = [800.0, 801.0, 799.5] * 30
    values = [[float(i % 5)] for i in range(90)]
    assert close(split_k_attention(scores, values, 8, 4), direct(scores, values))


def test_merge_is_hierarchical():
    rng = random.Random(9)
    for _ in range(30):
        parts = [([rng.uniform(-1, 1) for _ in range(3)], rng.uniform(-5, 5)) for _ in range(5)]
        whole = merge(parts)
        left = merge(parts[:2])
        right = merge(parts[2:])
        nested = merge([left, right])
        assert close(nested[0], whole[0]) and abs(nested[1] - whole[1]) < 1e-9


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def test_bad_arguments():
    assert raises(split_length, 0, 8, 32)
    assert raises(split_length, 5, 0, 32)
    assert raises(split_length, 5, 8, 0)
    assert raises(split_ranges, 0, 8, 32)
    assert raises(merge, [])
    assert raises(merge, [([1.0], -INF), ([2.0], -INF)])
    assert raises(merge, [([1.0], 0.0), ([2.0, 3.0], 0.0)])
