"""015 的可见测试。"""

from solution import compare_greedy


def _check(got, compared, max_diff, stop, step):
    assert (got.compared, got.stop, got.step) == (compared, stop, step), got
    assert abs(got.max_diff - max_diff) < 1e-9, got


REF = [[0.0, 5.0, 1.0], [2.0, 2.0005, 0.0], [9.0, 0.0, 0.0]]
OURS = [[0.0, 5.00002, 1.0], [2.0001, 2.0, 0.0], [0.0, 9.0, 0.0]]


def test_example():
    _check(compare_greedy([1, 0, 1], OURS, REF), 1, 0.0005, "near_tie", 1)


def test_all_equal():
    ref = [[1.0, 3.0], [4.0, 0.0]]
    _check(compare_greedy([1, 0], ref, ref), 2, 0.0, "end", 2)


def test_mismatch():
    ref = [[1.0, 3.0], [4.0, 0.0]]
    ours = [[1.0, 3.0], [4.0, 0.01]]
    _check(compare_greedy([1, 1], ours, ref), 1, 0.01, "mismatch", 1)


def test_smaller_threshold():
    # 阈值 1e-4 时第 1 步不算 near-tie：我们选了 0、参照答案是 1，判为不同
    _check(compare_greedy([1, 0, 1], OURS, REF, threshold=0.0001), 1, 0.0005, "mismatch", 1)
