"""021 的隐藏测试：正好等于某一档、最大一档、页表行数过滤、空档位、输入不被改写、非法参数。"""

from solution import graph_batch_sizes, pad_decode_batch, padded_batch_size


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


SIZES = [1, 2, 4, 8, 16, 24, 32]


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_every_batch_size_up_to_the_largest():
    expected = {1: 1, 2: 2, 3: 4, 4: 4, 5: 8, 8: 8, 9: 16, 16: 16, 17: 24, 24: 24, 25: 32, 32: 32}
    assert same({bs: padded_batch_size(bs, SIZES) for bs in expected}, expected)
    assert padded_batch_size(100, SIZES) is None


def test_single_size():
    assert same(padded_batch_size(1, [8]), 8)
    assert same(padded_batch_size(8, [8]), 8)
    assert padded_batch_size(9, [8]) is None


def test_no_sizes_means_always_eager():
    assert padded_batch_size(1, []) is None
    assert pad_decode_batch([(1, 2, 3, 4)], [], 0) is None


def test_sizes_are_filtered_by_page_table_rows():
    assert same(graph_batch_sizes(SIZES, 6), [1, 2, 4])
    assert same(graph_batch_sizes(SIZES, 24), [1, 2, 4, 8, 16, 24])
    assert same(graph_batch_sizes([64, 128], 8), [])
    assert same(graph_batch_sizes([], 8), [])


def test_sizes_are_sorted_and_unique():
    assert same(graph_batch_sizes([32, 8, 8, 1, 24, 1], 1000), [1, 8, 24, 32])


def test_bad_sizes():
    _raises_value_error(graph_batch_sizes, [0, 1, 2], 8)
    _raises_value_error(graph_batch_sizes, [1, -4], 8)
    _raises_value_error(graph_batch_sizes, [1, 2], 0)


def test_bad_batch_size():
    _raises_value_error(padded_batch_size, 0, SIZES)
    _raises_value_error(padded_batch_size, -3, SIZES)
    _raises_value_error(pad_decode_batch, [], SIZES, 0)


def test_exact_fit_adds_no_dummy_rows():
    rows = [(7, 1, 12, 2), (8, 4, 33, 5)]
    assert same(pad_decode_batch(rows, [1, 2, 4], 50), rows)


def test_many_dummy_rows_all_point_to_the_dummy_page():
    rows = [(5, 10, 3, 11)] * 17
    out = pad_decode_batch(rows, SIZES, 123)
    assert out is not None and len(out) == 24
    assert same(out[:17], rows)
    assert same(out[17:], [(0, 0, 123, 1)] * 7)


def test_input_rows_are_not_modified():
    rows = [(11, 5, 40, 6), (12, 3, 21, 4), (13, 9, 70, 10)]
    before = list(rows)
    out = pad_decode_batch(rows, [1, 2, 4, 8], 96)
    assert same(rows, before), "调用方的 rows 被改写了"
    assert out is not rows
    assert same(len(out), 4)


def test_largest_size_still_uses_the_graph():
    rows = [(i, i, i, i + 1) for i in range(32)]
    out = pad_decode_batch(rows, SIZES, 0)
    assert same(out, rows)
