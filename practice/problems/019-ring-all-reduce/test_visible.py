"""019 的可见测试。"""

from solution import ring_all_reduce


def test_three_ranks():
    results, sent = ring_all_reduce([[1, 2, 3], [10, 20, 30], [100, 200, 300]])
    assert results == [[111, 222, 333]] * 3
    assert sent == [4, 4, 4]


def test_uneven_chunks():
    results, sent = ring_all_reduce([[1, 1, 1, 1, 1], [2, 2, 2, 2, 2]])
    assert results == [[3, 3, 3, 3, 3]] * 2
    assert sent == [5, 5]


def test_single_rank():
    assert ring_all_reduce([[1.5, -2.0]]) == ([[1.5, -2.0]], [0])
