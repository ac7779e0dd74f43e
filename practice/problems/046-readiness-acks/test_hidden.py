"""046 的隐藏测试：ack 的条数与 tp 无关、乱序的事件、同一时刻的先后、超时的边界、开门之后的事件、
各种非法事件。"""

from solution import expected_acks, process_names, wait_until_ready


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


def _raises(func, *args, **kwargs):
    try:
        value = func(*args, **kwargs)
    except ValueError:
        return
    raise AssertionError(f"应当抛出 ValueError，实际返回了 {value!r}")


def test_expected_acks_does_not_depend_on_tp():
    assert same([expected_acks(tp, 0) for tp in (1, 2, 4, 8)], [2, 2, 2, 2])
    assert same(expected_acks(1, 3), 5)
    _raises(expected_acks, 0, 0)
    _raises(expected_acks, 1, -1)
    _raises(process_names, 0, 1)


def test_names_order():
    assert same(process_names(1, 0), ["scheduler-0", "detokenizer"])
    assert same(
        process_names(3, 2),
        [
            "scheduler-0",
            "scheduler-1",
            "scheduler-2",
            "detokenizer",
            "tokenizer-0",
            "tokenizer-1",
        ],
    )


def test_unsorted_events_are_processed_by_time():
    events = [
        (8.0, "tokenizer-1", "ack"),
        (2.0, "tokenizer-0", "ack"),
        (5.0, "scheduler-0", "ack"),
        (1.0, "detokenizer", "ack"),
    ]
    assert same(wait_until_ready(events, 4, 2), ("ready", 8.0))
    assert same(wait_until_ready(events, 4, 1)[0], "ready")  # tokenizer-1 不存在……
    # ……但在开门（5.0）之前不会处理到它


def test_ties_keep_list_order():
    acks = [(4.0, "detokenizer", "ack"), (4.0, "scheduler-0", "ack")]
    assert same(wait_until_ready(acks + [(4.0, "scheduler-1", "exit")], 2, 0), ("ready", 4.0))
    assert same(
        wait_until_ready([(4.0, "scheduler-1", "exit"), *acks], 2, 0),
        (
            "failed: scheduler-1",
            4.0,
        ),
    )


def test_exit_after_ack_still_fails_before_ready():
    events = [
        (1.0, "detokenizer", "ack"),
        (2.0, "detokenizer", "exit"),
        (3.0, "scheduler-0", "ack"),
    ]
    assert same(wait_until_ready(events, 1, 0), ("failed: detokenizer", 2.0))


def test_events_after_ready_are_ignored():
    events = [
        (1.0, "detokenizer", "ack"),
        (2.0, "scheduler-0", "ack"),
        (3.0, "scheduler-0", "exit"),
        (4.0, "nobody", "ack"),
        (5.0, "detokenizer", "ack"),
    ]
    assert same(wait_until_ready(events, 1, 0), ("ready", 2.0))


def test_timeout_boundary():
    events = [(1.0, "detokenizer", "ack"), (10.0, "scheduler-0", "ack")]
    assert same(wait_until_ready(events, 1, 0, timeout=10.0), ("ready", 10.0))
    assert same(wait_until_ready(events, 1, 0, timeout=9.99), ("timeout", 9.99))
    late_exit = [(1.0, "detokenizer", "ack"), (10.0, "scheduler-0", "exit")]
    assert same(wait_until_ready(late_exit, 1, 0, timeout=10.0), ("failed: scheduler-0", 10.0))
    assert same(wait_until_ready(late_exit, 1, 0, timeout=5.0), ("timeout", 5.0))
    assert same(wait_until_ready([], 1, 0, timeout=2.5), ("timeout", 2.5))


def test_hang_reports_the_last_event_time():
    assert same(wait_until_ready([], 1, 0), ("hang", 0.0))
    # rank 1 在加载模型时卡住了（没有退出）：rank 0 永远不会发 ack
    stuck = [(0.5, "detokenizer", "ack"), (0.7, "tokenizer-0", "ack")]
    assert same(wait_until_ready(stuck, 2, 1), ("hang", 0.7))


def test_invalid_events():
    _raises(wait_until_ready, [(1.0, "scheduler-9", "ack")], 2, 0)
    _raises(wait_until_ready, [(1.0, "tokenizer-0", "ack")], 1, 0)
    _raises(wait_until_ready, [(1.0, "scheduler-1", "ack")], 2, 0)
    _raises(wait_until_ready, [(1.0, "detokenizer", "ready")], 1, 0)
    _raises(wait_until_ready, [(1.0, "detokenizer", "ack"), (2.0, "detokenizer", "ack")], 1, 0)


def test_zero_timeout_is_a_timeout():
    # timeout=0.0 是“给了时限”，不是“没给”：只处理恰好在 0.0 发生的事件
    assert same(wait_until_ready([], 1, 0, timeout=0.0), ("timeout", 0.0))
    late = [(0.0, "detokenizer", "ack"), (1.0, "scheduler-0", "ack")]
    assert same(wait_until_ready(late, 1, 0, timeout=0.0), ("timeout", 0.0))
    at_zero = [(0.0, "detokenizer", "ack"), (0.0, "scheduler-0", "ack")]
    assert same(wait_until_ready(at_zero, 1, 0, timeout=0.0), ("ready", 0.0))
    crash = [(0.0, "scheduler-1", "exit"), (3.0, "detokenizer", "ack")]
    assert same(wait_until_ready(crash, 2, 0, timeout=0.0), ("failed: scheduler-1", 0.0))


def test_hang_time_is_the_latest_event_for_unsorted_input():
    # 事件按时间处理：“最后一个事件”是时间最晚的那个，不是列表里的最后一项
    stuck = [(0.7, "tokenizer-0", "ack"), (0.5, "detokenizer", "ack")]
    assert same(wait_until_ready(stuck, 2, 1), ("hang", 0.7))
    stuck = [(2.0, "detokenizer", "ack"), (9.0, "tokenizer-1", "ack"), (4.0, "tokenizer-0", "ack")]
    assert same(wait_until_ready(stuck, 1, 2), ("hang", 9.0))


def test_result_types():
    assert type(expected_acks(1, 0)) is int
    assert type(process_names(1, 1)) is list
    result = wait_until_ready([(1.0, "detokenizer", "ack")], 1, 0)
    assert type(result) is tuple and type(result[0]) is str and type(result[1]) is float
