"""012 的隐藏测试：大一点的前缀、块对角、decode 批次、非法参数。"""

from solution import batch_mask, extend_mask, last_indices


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


T, F = True, False


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_chapter_example():
    assert same(
        extend_mask(4, 3),
        [
            [T, T, T, T, T, F, F],
            [T, T, T, T, T, T, F],
            [T, T, T, T, T, T, T],
        ],
    )


def test_shape_and_counts():
    for cached, extend in [(0, 1), (0, 6), (3, 1), (7, 4), (10, 10)]:
        mask = extend_mask(cached, extend)
        assert same(len(mask), extend)
        assert all(len(row) == cached + extend for row in mask)
        # 第 j 行恰好能看到 cached + j + 1 个位置，而且是最前面的那些
        for j, row in enumerate(mask):
            assert same(row, [True] * (cached + j + 1) + [False] * (extend - j - 1))


def test_block_diagonal():
    reqs = [(2, 3), (0, 2), (5, 1)]
    mask = batch_mask(reqs)
    assert len(mask) == 6 and all(len(r) == 13 for r in mask)
    assert same([r[:5] for r in mask[:3]], extend_mask(2, 3))
    assert same([r[5:7] for r in mask[3:5]], extend_mask(0, 2))
    assert same([r[7:] for r in mask[5:]], extend_mask(5, 1))
    # 块外全是 False
    assert not any(mask[i][j] for i in range(3) for j in range(5, 13))
    assert not any(mask[i][j] for i in range(3, 5) for j in [*range(5), *range(7, 13)])
    assert not any(mask[5][j] for j in range(7))


def test_decode_batch():
    assert same(batch_mask([(2, 1), (1, 1)]), [[T, T, T, F, F], [F, F, F, T, T]])
    assert same(last_indices([(9, 1), (3, 1), (0, 1)]), [0, 1, 2])


def test_single_request_batch_equals_extend_mask():
    assert same(batch_mask([(3, 4)]), extend_mask(3, 4))
    assert same(batch_mask([]), [])
    assert same(last_indices([]), [])


def test_last_indices_ignore_prefix():
    assert same(last_indices([(100, 1)]), [0])
    assert same(last_indices([(0, 1), (50, 4), (2, 2)]), [0, 4, 6])


def test_bad_arguments():
    _raises_value_error(extend_mask, -1, 2)
    _raises_value_error(extend_mask, 2, 0)
    _raises_value_error(batch_mask, [(0, 2), (1, 0)])
    _raises_value_error(batch_mask, [(-2, 3)])
    _raises_value_error(last_indices, [(0, 0)])
