"""048 的可见测试：题面里的示例。"""

import random

from solution import sample_batch, sample_index, seeded_uniform


def test_examples_from_the_statement():
    assert sample_index([0.25, 0.25, 0.25, 0.25], 0.0) == 0
    assert sample_index([0.25, 0.25, 0.25, 0.25], 0.25) == 1
    assert sample_index([0.5, 0.0, 0.5], 0.5) == 2
    assert sample_index([1, 2, 1], 0.5) == 1
    assert sample_index([0.0, 1.0], 0.0) == 1


def test_empty_weights_rejected():
    try:
        sample_index([], 0.5)
    except ValueError:
        return
    raise AssertionError("空的 weights 应当抛 ValueError")


def test_batch_example():
    assert seeded_uniform(7, 3) == random.Random("7:3").random()
    assert sample_batch([[1, 1], [1, 1]], [7, None], [3, 3], random.Random(0)) == [1, 1]
