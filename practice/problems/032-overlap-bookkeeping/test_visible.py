"""032 的可见测试。"""

from solution import run_loop


def test_plain_loop():
    t = run_loop([(0, 2), (0, 3)], 2, overlap=False)
    assert t.batches == [[0, 1], [0, 1], [1]]
    assert t.outputs == {0: [0, 1], 1: [0, 1, 2]}
    assert t.discarded == []


def test_overlap_loop():
    t = run_loop([(0, 2), (0, 3)], 2, overlap=True)
    assert t.batches == [[0, 1], [0, 1], [0, 1], [1], []]
    assert t.outputs == {0: [0, 1], 1: [0, 1, 2]}
    assert t.discarded == [(0, 2), (1, 3)]


def test_overlap_delays_admission():
    assert run_loop([(0, 1), (0, 2), (0, 2)], 2, overlap=False).batches == [[0, 1], [1, 2], [2]]
    t = run_loop([(0, 1), (0, 2), (0, 2)], 2, overlap=True)
    assert t.batches == [[0, 1], [0, 1], [1, 2], [2], [2], []]
    assert t.discarded == [(0, 1), (1, 2), (2, 2)]
