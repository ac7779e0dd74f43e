"""019 的隐藏测试：各种 N 和 L、发送量、累加顺序、不改输入、非法输入。"""

import copy

from solution import ring_all_reduce


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


def _raises_value_error(data):
    try:
        value = ring_all_reduce(data)
    except ValueError:
        return
    raise AssertionError(f"ring_all_reduce({data!r}) 应当抛出 ValueError，实际返回了 {value!r}")


def _data(n, length):
    return [[(r + 1) * 1000 + i * (r + 3) for i in range(length)] for r in range(n)]


def test_sums_for_many_shapes():
    for n in range(1, 7):
        for length in (0, 1, n - 1, n, n + 1, 3 * n + 2, 17):
            if length < 0:
                continue
            data = _data(n, length)
            results, _ = ring_all_reduce(data)
            want = [sum(data[r][i] for r in range(n)) for i in range(length)]
            assert same(results, [want] * n), f"n={n}, length={length}"


def test_traffic_is_two_chunks_per_step():
    for n in (2, 4, 8):
        length = 24
        _, sent = ring_all_reduce(_data(n, length))
        assert same(sent, [2 * (n - 1) * length // n] * n), f"n={n}: {sent}"


def test_traffic_with_uneven_chunks():
    # L=7、N=3：块是 [0,2)、[2,4)、[4,7)，长度 2、2、3
    _, sent = ring_all_reduce(_data(3, 7))
    # reduce-scatter：rank r 依次发第 r、r-1 块；all-gather：依次发第 r+1、r 块
    assert same(sent, [2 + 3 + 2 + 2, 2 + 2 + 3 + 2, 3 + 2 + 2 + 3])


def test_each_chunk_is_summed_around_the_ring():
    big = 1e16
    # 第 0 块（下标 0）从 rank 0 开始加：(big + 1) - big + 1 = 1.0（1 被 big 吞掉了）
    # 第 1 块（下标 1）从 rank 1 开始加：(1 - big) + 1 + big = 0.0
    # 第 2 块（下标 2）从 rank 2 开始加：(-big + 1) + big + 1 = 1.0
    data = [[big, big, big], [1.0, 1.0, 1.0], [-big, -big, -big], [1.0, 1.0, 1.0]]
    data = [row + [0.0] for row in data]  # 4 个 rank、4 块，每块一个数
    results, _ = ring_all_reduce(data)
    want = []
    for c in range(4):
        acc = data[c][c]
        for k in range(1, 4):
            acc = acc + data[(c + k) % 4][c]
        want.append(acc)
    assert same(results, [want] * 4), (results[0], want)
    assert results[0][:3] != [sum(d[i] for d in data) for i in range(3)]  # 和 rank 0 起头的顺序不同


def test_every_rank_ends_with_identical_values():
    data = [[0.1 * (r + 1) + 0.01 * i for i in range(10)] for r in range(5)]
    results, _ = ring_all_reduce(data)
    assert all(row == results[0] for row in results)


def test_input_not_modified():
    data = _data(4, 9)
    before = copy.deepcopy(data)
    results, _ = ring_all_reduce(data)
    assert same(data, before)
    assert results[0] is not data[0]


def test_invalid_inputs():
    _raises_value_error([])
    _raises_value_error([[1.0, 2.0], [1.0]])
