"""011 的隐藏测试：部分用满的最后一页、decode 批次、各种非法参数。"""

from solution import batch_slots, token_slots


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


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_pages_in_any_order():
    assert same(token_slots([9, 0, 4], 2, 6), [18, 19, 0, 1, 8, 9])
    assert same(token_slots([9, 0, 4], 2, 5), [18, 19, 0, 1, 8])


def test_zero_length_and_exact_fit():
    assert same(token_slots([], 4, 0), [])
    assert same(token_slots([3], 4, 0), [])
    assert same(token_slots([3, 1], 4, 8), [12, 13, 14, 15, 4, 5, 6, 7])


def test_slots_inside_a_page_are_contiguous():
    slots = token_slots([7, 2, 5], 8, 20)
    for i in range(1, 20):
        if i % 8:
            assert same(slots[i], slots[i - 1] + 1)
        assert same(slots[i] // 8, [7, 2, 5][i // 8])


def test_bad_token_slots_arguments():
    _raises_value_error(token_slots, [1, 2], 0, 1)
    _raises_value_error(token_slots, [1, 2], 4, -1)
    _raises_value_error(token_slots, [1, 2], 4, 9)
    _raises_value_error(token_slots, [], 1, 1)


def test_decode_batch():
    table = [[10, 11, 12, 13], [30, 31, 32, 33], [50, 51, 52, 53]]
    assert same(batch_slots(table, [(2, 1, 2), (0, 3, 4), (1, 0, 1)]), ([1, 3, 0], [51, 13, 30]))


def test_order_follows_reqs_not_rows():
    table = [[0, 1, 2], [3, 4, 5]]
    assert same(batch_slots(table, [(1, 0, 2), (0, 1, 3)]), ([0, 1, 1, 2], [3, 4, 1, 2]))


def test_full_row():
    table = [[7, 8, 9]]
    assert same(batch_slots(table, [(0, 0, 3)]), ([0, 1, 2], [7, 8, 9]))
    assert same(batch_slots(table, [(0, 2, 3)]), ([2], [9]))


def test_empty_batch():
    assert same(batch_slots([[1, 2]], []), ([], []))


def test_bad_requests():
    table = [[0, 1, 2, 3], [4, 5, 6, 7]]
    _raises_value_error(batch_slots, table, [(2, 0, 1)])
    _raises_value_error(batch_slots, table, [(-1, 0, 1)])
    _raises_value_error(batch_slots, table, [(0, 2, 2)])
    _raises_value_error(batch_slots, table, [(0, 3, 2)])
    _raises_value_error(batch_slots, table, [(0, -1, 2)])
    _raises_value_error(batch_slots, table, [(0, 0, 5)])
    _raises_value_error(batch_slots, table, [(0, 0, 2), (1, 0, 9)])
