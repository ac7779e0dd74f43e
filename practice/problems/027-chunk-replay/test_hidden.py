"""027 的隐藏测试：一个 token 一块、decode 行、整段不分块、各种不合法的批次、丢掉的 token。"""

from solution import collect_outputs, replay


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


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"应当抛出 ValueError，实际返回了 {value!r}")


def test_one_token_chunks():
    steps = [[(5, 1)], [(5, 1)], [(5, 1)], [(5, 1)], [(5, 1)]]
    assert same(
        replay({5: 3}, steps),
        [
            [(5, 0, 1, False)],
            [(5, 1, 2, False)],
            [(5, 2, 3, True)],
            [(5, 3, 4, True)],
            [(5, 4, 5, True)],
        ],
    )
    assert same(collect_outputs({5: 3}, steps, [[1], [2], [3], [4], [5]]), {5: [3, 4, 5]})


def test_unchunked_prefill_then_decode():
    lens = {1: 4, 2: 1}
    steps = [[(1, 4), (2, 1)], [(2, 1), (1, 1)], [(1, 1)]]
    assert same(
        replay(lens, steps),
        [
            [(1, 0, 4, True), (2, 0, 1, True)],
            [(2, 1, 2, True), (1, 4, 5, True)],
            [(1, 5, 6, True)],
        ],
    )
    assert same(collect_outputs(lens, steps, [[7, 8], [9, 10], [11]]), {1: [7, 10, 11], 2: [8, 9]})


def test_chunked_request_alongside_decode_free_prefill():
    # 请求 3 分三块；请求 4 在第 2 步（从 0 数）整段算完，但要等请求 6 的 prefill 也算完才 decode
    lens = {3: 9, 4: 2, 6: 5}
    steps = [[(3, 4)], [(3, 4)], [(3, 1), (4, 2), (6, 1)], [(6, 4)], [(3, 1), (4, 1), (6, 1)]]
    rows = replay(lens, steps)
    flags = [r[3] for step in rows for r in step]
    assert same(flags, [False, False, True, True, False, True, True, True, True])
    assert same(rows[2], [(3, 8, 9, True), (4, 0, 2, True), (6, 0, 1, False)])
    assert same(rows[4], [(3, 9, 10, True), (4, 2, 3, True), (6, 5, 6, True)])
    tokens = [[100], [101], [102, 103, 104], [105], [106, 107, 108]]
    assert same(collect_outputs(lens, steps, tokens), {3: [102, 106], 4: [103, 107], 6: [105, 108]})


def test_outputs_do_not_depend_on_how_the_prompt_was_chunked():
    # 同一个"模型"：采样器在每一行给出 device_len * 10 + uid；不同的切法得到同样的输出
    lens = {0: 6, 1: 4}
    plans = [
        [[(0, 6), (1, 4)], [(0, 1), (1, 1)], [(0, 1), (1, 1)]],
        [[(0, 3)], [(0, 3), (1, 1)], [(1, 3)], [(0, 1), (1, 1)], [(0, 1), (1, 1)]],
        [[(0, 1)]] * 6 + [[(1, 1)]] * 4 + [[(0, 1), (1, 1)]] * 2,
    ]
    for steps in plans:
        rows = replay(lens, steps)
        tokens = [[r[2] * 10 + r[0] for r in step] for step in rows]
        assert same(collect_outputs(lens, steps, tokens), {0: [60, 70, 80], 1: [41, 51, 61]})


def test_uids_without_output_and_order():
    lens = {9: 5, 3: 2, 4: 1}
    steps = [[(9, 3)]]
    assert same(replay(lens, steps), [[(9, 0, 3, False)]])
    out = collect_outputs(lens, steps, [[1]])
    assert same(out, {9: [], 3: [], 4: []})
    assert same(list(out), [9, 3, 4])
    assert same(replay(lens, []), [])
    assert same(replay(lens, [[]]), [[]])


def test_bad_rows():
    _raises_value_error(replay, {0: 3}, [[(1, 1)]])  # 不认识的 uid
    _raises_value_error(replay, {0: 3}, [[(0, 0)]])
    _raises_value_error(replay, {0: 3}, [[(0, -1)]])
    _raises_value_error(replay, {0: 3}, [[(0, 1), (0, 1)]])  # 一步里出现两次
    _raises_value_error(replay, {0: 3}, [[(0, 4)]])
    _raises_value_error(replay, {0: 3}, [[(0, 3)], [(0, 2)]])  # decode 一步只能 1 个
    _raises_value_error(replay, {0: 3, 1: 5}, [[(0, 3), (1, 2)], [(1, 1), (0, 1)]])


def test_bad_token_shapes():
    lens = {0: 2}
    steps = [[(0, 2)], [(0, 1)]]
    _raises_value_error(collect_outputs, lens, steps, [[1]])
    _raises_value_error(collect_outputs, lens, steps, [[1], [2, 3]])
    _raises_value_error(collect_outputs, lens, steps, [[1], [2], [3]])
    _raises_value_error(collect_outputs, {0: 3}, [[(0, 4)]], [[1]])


def test_inputs_untouched():
    lens = {0: 2}
    steps = [[(0, 1)], [(0, 1)]]
    tokens = [[5], [6]]
    collect_outputs(lens, steps, tokens)
    assert lens == {0: 2} and steps == [[(0, 1)], [(0, 1)]] and tokens == [[5], [6]]
