"""011 的可见测试。"""

from solution import batch_slots, token_slots


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


TABLE = [
    [20, 21, 22, 23, 8, 9, 10, 11],
    [4, 5, 6, 7, 12, 13, 14, 15],
]


def test_token_slots_example():
    assert token_slots([5, 2], 4, 7) == [20, 21, 22, 23, 8, 9, 10]


def test_page_size_one():
    assert token_slots([3, 0, 7], 1, 3) == [3, 0, 7]


def test_not_enough_pages():
    _raises_value_error(token_slots, [1], 4, 5)


def test_batch_example():
    assert batch_slots(TABLE, [(1, 4, 7), (0, 0, 2)]) == ([4, 5, 6, 0, 1], [12, 13, 14, 20, 21])


def test_single_prefill():
    assert batch_slots(TABLE, [(0, 0, 5)]) == ([0, 1, 2, 3, 4], [20, 21, 22, 23, 8])
