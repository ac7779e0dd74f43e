"""018 的可见测试。"""

from solution import group_by_expert, moe_combine


def scale_expert(e, rows):
    assert rows, "不应当用空的 rows 调用专家"
    return [[(e + 1) * v for v in row] for row in rows]


X = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
IDS = [[2, 0], [0, 1], [2, 1]]
WEIGHTS = [[0.5, 0.5], [0.75, 0.25], [1.0, 0.0]]


def test_group_example():
    assert group_by_expert(IDS, 4) == [[(0, 1), (1, 0)], [(1, 1), (2, 1)], [(0, 0), (2, 0)], []]


def test_combine_example():
    got = moe_combine(X, IDS, WEIGHTS, 4, scale_expert)
    want = [[2.0, 4.0], [3.75, 5.0], [15.0, 18.0]]
    for g, w in zip(got, want):
        assert all(abs(a - b) < 1e-12 for a, b in zip(g, w)), (got, want)
