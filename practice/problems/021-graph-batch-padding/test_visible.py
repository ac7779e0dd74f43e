"""021 的可见测试。"""

from solution import graph_batch_sizes, pad_decode_batch, padded_batch_size

SIZES = [1, 2, 4, 8, 16, 24, 32]


def test_graph_batch_sizes_example():
    assert graph_batch_sizes([8, 1, 4, 4, 2], 8) == [1, 2, 4, 8]


def test_padding_examples():
    assert padded_batch_size(3, SIZES) == 4
    assert padded_batch_size(8, SIZES) == 8
    assert padded_batch_size(17, SIZES) == 24
    assert padded_batch_size(33, SIZES) is None


def test_pad_decode_batch_example():
    rows = [(11, 5, 40, 6), (12, 3, 21, 4), (13, 9, 70, 10)]
    expected = [(11, 5, 40, 6), (12, 3, 21, 4), (13, 9, 70, 10), (0, 0, 96, 1)]
    assert pad_decode_batch(rows, [1, 2, 4, 8], 96) == expected


def test_too_big_runs_eagerly():
    rows = [(i, i, i, i + 1) for i in range(9)]
    assert pad_decode_batch(rows, [1, 2, 4, 8], 96) is None
