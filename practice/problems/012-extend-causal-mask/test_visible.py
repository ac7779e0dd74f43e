"""012 的可见测试。"""

from solution import batch_mask, extend_mask, last_indices

T, F = True, False


def test_no_prefix_is_plain_causal():
    assert extend_mask(0, 3) == [[T, F, F], [T, T, F], [T, T, T]]


def test_prefix_is_fully_visible():
    assert extend_mask(2, 2) == [[T, T, T, F], [T, T, T, T]]


def test_decode_sees_everything():
    assert extend_mask(5, 1) == [[T] * 6]


def test_batch_example():
    assert batch_mask([(1, 2), (0, 1)]) == [
        [T, T, F, F],
        [T, T, T, F],
        [F, F, F, T],
    ]


def test_last_indices_example():
    assert last_indices([(0, 5), (4, 3), (0, 2)]) == [4, 7, 9]
