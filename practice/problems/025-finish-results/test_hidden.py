"""025 的隐藏测试：EOS 与长度同时到达、max_seq_len 截断、四种坏请求、整批检查、恰好释放一次。"""

from solution import ResultProcessor


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


def _make(max_seq_len=32, num_pages=16, page_size=4, eos=(2,)):
    freed = []
    proc = ResultProcessor(max_seq_len, num_pages, page_size, frozenset(eos), freed.append)
    return proc, freed


def test_length_limit_exactly_max_tokens():
    proc, freed = _make()
    assert same(proc.submit(1, 3, 4), [])
    out = [proc.process([(1, t)]) for t in (5, 6, 7, 8)]
    assert same(
        out,
        [
            [(1, 5, False, None)],
            [(1, 6, False, None)],
            [(1, 7, False, None)],
            [(1, 8, True, "length")],
        ],
    )
    assert same(freed, [1])
    assert same(proc.running, [])


def test_max_tokens_one_finishes_on_the_first_token():
    proc, freed = _make()
    proc.submit(5, 3, 1)
    assert same(proc.process([(5, 9)]), [(5, 9, True, "length")])
    assert same(freed, [5])


def test_eos_on_the_last_allowed_token_frees_once():
    proc, freed = _make()
    proc.submit(1, 3, 2)
    proc.submit(2, 3, 1)
    assert same(proc.process([(1, 4), (2, 2)]), [(1, 4, False, None), (2, 2, True, "stop")])
    assert same(proc.process([(1, 2)]), [(1, 2, True, "stop")])
    assert same(freed, [2, 1])


def test_ignore_eos_runs_to_length():
    proc, freed = _make(eos=(2, 3))
    proc.submit(1, 3, 3, ignore_eos=True)
    assert same(proc.process([(1, 2)]), [(1, 2, False, None)])
    assert same(proc.process([(1, 3)]), [(1, 3, False, None)])
    assert same(proc.process([(1, 2)]), [(1, 2, True, "length")])
    assert same(freed, [1])


def test_any_eos_id_stops():
    proc, freed = _make(eos=(2, 3))
    proc.submit(1, 3, 10)
    proc.submit(2, 3, 10)
    assert same(proc.process([(1, 3), (2, 4)]), [(1, 3, True, "stop"), (2, 4, False, None)])
    assert same(proc.running, [2])


def test_max_seq_len_caps_output():
    proc, freed = _make(max_seq_len=10, num_pages=100, page_size=1)
    proc.submit(1, 9, 100)  # 只能生成 1 个
    proc.submit(2, 7, 100)  # 只能生成 3 个
    proc.submit(3, 7, 2)  # max_tokens 更小
    assert same(
        proc.process([(1, 5), (2, 5), (3, 5)]),
        [
            (1, 5, True, "length"),
            (2, 5, False, None),
            (3, 5, False, None),
        ],
    )
    assert same(proc.process([(2, 5), (3, 5)]), [(2, 5, False, None), (3, 5, True, "length")])
    assert same(proc.process([(2, 5)]), [(2, 5, True, "length")])
    assert same(freed, [1, 3, 2])


def test_bad_requests_come_back_as_errors():
    proc, freed = _make(max_seq_len=16, num_pages=3, page_size=4)
    assert same(proc.submit(1, 0, 4), [(1, None, True, "error")])  # 空提示
    assert same(proc.submit(2, 16, 4), [(2, None, True, "error")])  # 提示 >= max_seq_len
    assert same(proc.submit(3, 17, 4), [(3, None, True, "error")])
    assert same(proc.submit(4, 3, 0), [(4, None, True, "error")])  # max_tokens < 1
    assert same(proc.submit(5, 3, -2), [(5, None, True, "error")])
    assert same(
        proc.submit(6, 12, 1), [(6, None, True, "error")]
    )  # 13 个 token 要 4 页，池子只有 3 页
    assert same(proc.running, [])
    assert same(freed, [])


def test_pool_check_uses_capped_output_len():
    # 3 页 × 4 = 12 格
    proc, freed = _make(max_seq_len=16, num_pages=3, page_size=4)
    assert same(proc.submit(1, 11, 1), [])  # 12 个 token，正好 3 页
    assert same(proc.submit(2, 11, 2), [(2, None, True, "error")])  # 13 个，要 4 页
    # max_tokens = 1000，但 output_len 被 max_seq_len 截成 2：10 + 2 = 12 个 token，装得下
    proc2, _ = _make(max_seq_len=12, num_pages=3, page_size=4)
    assert same(proc2.submit(3, 10, 1000), [])
    assert same(proc2.running, [3])
    assert same(proc.running, [1])
    assert same(freed, [])


def test_error_uid_can_be_submitted_again():
    proc, freed = _make()
    assert same(proc.submit(1, 0, 4), [(1, None, True, "error")])
    assert same(proc.submit(1, 3, 4), [])
    assert same(proc.running, [1])


def test_finished_uid_can_be_reused():
    proc, freed = _make()
    proc.submit(1, 3, 1)
    proc.process([(1, 7)])
    assert same(proc.submit(1, 3, 2), [])
    assert same(proc.process([(1, 7)]), [(1, 7, False, None)])
    assert same(proc.process([(1, 7)]), [(1, 7, True, "length")])
    assert same(freed, [1, 1])


def test_duplicate_running_uid_raises():
    proc, _ = _make()
    proc.submit(1, 3, 4)
    _raises_value_error(proc.submit, 1, 3, 4)
    assert same(proc.running, [1])


def test_bad_batch_changes_nothing():
    proc, freed = _make()
    proc.submit(1, 3, 1)
    proc.submit(2, 3, 5)
    _raises_value_error(proc.process, [(1, 5), (9, 5)])  # 9 不在运行
    _raises_value_error(proc.process, [(1, 5), (1, 6)])  # 1 出现两次
    assert same(freed, [])
    assert same(proc.running, [1, 2])
    assert same(proc.process([(2, 5), (1, 5)]), [(2, 5, False, None), (1, 5, True, "length")])
    assert same(freed, [1])
    _raises_value_error(proc.process, [(1, 5)])  # 1 已经结束了
    assert same(freed, [1])


def test_many_requests_each_freed_exactly_once():
    proc, freed = _make(max_seq_len=64, num_pages=64, page_size=4, eos=(0,))
    limits = {uid: 1 + uid % 5 for uid in range(12)}
    for uid, max_tokens in limits.items():
        assert same(proc.submit(uid, 4 + uid, max_tokens), [])
    finished = {}
    step = 0
    while proc.running:
        batch = [(uid, (uid * 7 + step * 3) % 11) for uid in proc.running]
        for uid, token, done, reason in proc.process(batch):
            if done:
                assert uid not in finished
                finished[uid] = (step, token, reason)
        step += 1
    assert same(sorted(freed), list(range(12)))
    assert same(len(freed), 12)
    for uid, (end, token, reason) in finished.items():
        if reason == "stop":
            assert same(token, 0)
        else:
            assert reason == "length" and end + 1 == limits[uid]
    # uid 0 和 7 的 EOS 正好是最后一个允许的 token：算 "stop"
    assert same(finished[0], (0, 0, "stop"))
    assert same(finished[7], (2, 0, "stop"))
    assert same(finished[9], (1, 0, "stop"))
    assert same(finished[4], (4, 7, "length"))
    assert same(freed, [0, 5, 10, 11, 1, 6, 9, 2, 7, 3, 8, 4])
