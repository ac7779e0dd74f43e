"""018 的隐藏测试：每个专家最多调用一次、空专家不调用、行的顺序、累加、非法输入、不改输入。"""

import copy

from solution import group_by_expert, moe_combine


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


class Recorder:
    """专家 e 的输出：每个分量乘以 (e + 1) 再加 e。记下每次调用。"""

    def __init__(self):
        self.calls = []

    def __call__(self, e, rows):
        assert rows, f"用空的 rows 调用了专家 {e}"
        self.calls.append((e, [list(r) for r in rows]))
        return [[(e + 1) * v + e for v in row] for row in rows]


def reference(x, ids, weights):
    out = []
    for t, row in enumerate(x):
        acc = [0.0] * len(row)
        for e, w in zip(ids[t], weights[t]):
            acc = [a + w * ((e + 1) * v + e) for a, v in zip(acc, row)]
        out.append(acc)
    return out


def _close(a, b):
    return len(a) == len(b) and all(
        len(r) == len(s) and all(abs(u - v) < 1e-9 for u, v in zip(r, s)) for r, s in zip(a, b)
    )


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__} 应当抛出 ValueError，实际返回了 {value!r}")


X = [[float(t), float(2 * t + 1), -1.0] for t in range(6)]
IDS = [[3, 1], [1, 0], [3, 0], [1, 3], [0, 1], [3, 1]]
WEIGHTS = [[0.6, 0.4], [0.9, 0.1], [0.5, 0.5], [0.7, 0.3], [0.2, 0.8], [0.55, 0.45]]


def test_matches_the_per_token_formula():
    assert _close(moe_combine(X, IDS, WEIGHTS, 5, Recorder()), reference(X, IDS, WEIGHTS))


def test_each_expert_called_at_most_once_and_never_empty():
    rec = Recorder()
    moe_combine(X, IDS, WEIGHTS, 5, rec)
    experts = [e for e, _ in rec.calls]
    assert same(sorted(experts), [0, 1, 3]), f"调用的专家：{experts}（专家 2、4 没有 token）"


def test_rows_are_in_token_order():
    rec = Recorder()
    moe_combine(X, IDS, WEIGHTS, 5, rec)
    rows = {e: r for e, r in rec.calls}
    assert same(rows[1], [X[0], X[1], X[3], X[4], X[5]])
    assert same(rows[3], [X[0], X[2], X[3], X[5]])
    assert same(rows[0], [X[1], X[2], X[4]])


def test_group_by_expert_lists_token_and_slot():
    groups = group_by_expert(IDS, 5)
    assert same(groups[0], [(1, 1), (2, 1), (4, 0)])
    assert groups[2] == [] and groups[4] == []
    assert same(sum(len(g) for g in groups), 12)


def test_outputs_of_k_experts_are_added():
    x = [[1.0, 1.0]]
    ids = [[0, 1, 2]]
    weights = [[0.25, 0.25, 0.5]]
    # 专家 0：1·v + 0 = 1；专家 1：2·v + 1 = 3；专家 2：3·v + 2 = 5；0.25 + 0.75 + 2.5 = 3.5
    assert _close(moe_combine(x, ids, weights, 3, Recorder()), [[3.5, 3.5]])


def test_empty_batch():
    rec = Recorder()
    assert same(moe_combine([], [], [], 4, rec), [])
    assert same(rec.calls, [])
    assert same(group_by_expert([], 2), [[], []])


def test_inputs_are_not_modified():
    x, ids, weights = copy.deepcopy(X), copy.deepcopy(IDS), copy.deepcopy(WEIGHTS)

    def mutating(e, rows):
        result = [[(e + 1) * v + e for v in row] for row in rows]
        for row in rows:
            row[0] = 1e9  # 专家改了传给它的行
        return result

    got = moe_combine(x, ids, weights, 5, mutating)
    assert x == X and ids == IDS and weights == WEIGHTS
    assert _close(got, reference(X, IDS, WEIGHTS))


def test_invalid_inputs():
    _raises_value_error(moe_combine, [[1.0]], [[5]], [[1.0]], 4, Recorder())
    _raises_value_error(moe_combine, [[1.0]], [[1, 1]], [[0.5, 0.5]], 4, Recorder())
    _raises_value_error(moe_combine, [[1.0]], [[1, 2]], [[1.0]], 4, Recorder())
    _raises_value_error(moe_combine, [[1.0], [2.0]], [[1]], [[1.0]], 4, Recorder())
    _raises_value_error(group_by_expert, [[0, -1]], 4)
