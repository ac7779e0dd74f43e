"""045 的隐藏测试：共用的截止时间、卡住的调度器走 terminate、不理 SIGTERM 的被 kill、
崩掉的进程不发消息也不 terminate、文件只删还在的、没有调度器时不发 ExitMsg。"""

from solution import Proc, shutdown


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


def test_tp2_and_two_tokenizers_all_cooperate():
    procs = [
        Proc("TP0", "scheduler", on_exit_msg=1.0, socket_file="/tmp/b"),
        Proc("TP1", "scheduler", on_exit_msg=1.25),
        Proc("detok", "tokenizer", on_sigterm=0.5, socket_file="/tmp/d"),
        Proc("tok0", "tokenizer", on_sigterm=0.25),
        Proc("tok1", "tokenizer", on_sigterm=0.75),
    ]
    assert same(
        shutdown(procs, ["/tmp/b", "/tmp/d", "/tmp/f", "/tmp/t"]),
        [
            (0.0, "send", "ExitMsg"),
            (1.25, "close", "exit sender"),
            (1.25, "terminate", "detok"),
            (1.25, "terminate", "tok0"),
            (1.25, "terminate", "tok1"),
            (2.0, "unlink", "/tmp/f"),
            (2.0, "unlink", "/tmp/t"),
        ],
    )


def test_deadline_is_shared_by_all_schedulers():
    procs = [Proc("TP0", "scheduler"), Proc("TP1", "scheduler"), Proc("TP2", "scheduler")]
    actions = shutdown(procs, [], timeout=10.0, grace=5.0)
    assert same(actions[:2], [(0.0, "send", "ExitMsg"), (10.0, "close", "exit sender")])
    # 卡住的调度器照样理 SIGTERM（on_sigterm 默认 0）
    assert same(actions[2:], [(10.0, "terminate", n) for n in ("TP0", "TP1", "TP2")])


def test_late_scheduler_after_deadline_is_terminated():
    procs = [
        Proc("TP0", "scheduler", on_exit_msg=12.0, on_sigterm=1.0, socket_file="/tmp/b"),
        Proc("TP1", "scheduler", on_exit_msg=3.0),
    ]
    assert same(
        shutdown(procs, ["/tmp/b"], timeout=10.0),
        [
            (0.0, "send", "ExitMsg"),
            (10.0, "close", "exit sender"),
            (10.0, "terminate", "TP0"),
        ],
    )  # TP0 在 11.0 因为 SIGTERM 自己退出了，文件也删了


def test_process_ignoring_sigterm_is_killed_and_its_file_removed():
    procs = [
        Proc("TP0", "scheduler", on_exit_msg=0.5),
        Proc("detok", "tokenizer", on_sigterm=None, socket_file="/tmp/d"),
        Proc("tok0", "tokenizer", on_sigterm=2.0),
    ]
    assert same(
        shutdown(procs, ["/tmp/d"], grace=5.0),
        [
            (0.0, "send", "ExitMsg"),
            (0.5, "close", "exit sender"),
            (0.5, "terminate", "detok"),
            (0.5, "terminate", "tok0"),
            (5.5, "kill", "detok"),
            (5.5, "unlink", "/tmp/d"),
        ],
    )


def test_grace_counts_from_each_join():
    procs = [
        Proc("a", "tokenizer", on_sigterm=None),
        Proc("b", "tokenizer", on_sigterm=7.0),
        Proc("c", "tokenizer", on_sigterm=None),
    ]
    assert same(
        shutdown(procs, [], grace=5.0),
        [
            (0.0, "terminate", "a"),
            (0.0, "terminate", "b"),
            (0.0, "terminate", "c"),
            (5.0, "kill", "a"),
            (12.0, "kill", "c"),  # 轮到 c 时已经是 7.0（b 在 7.0 退出），c 从这时起再等 5 秒
        ],
    )


def test_crashed_processes_are_neither_signalled_nor_cleaned_up_after():
    procs = [
        Proc("TP0", "scheduler", alive=False, socket_file="/tmp/b"),
        Proc("detok", "tokenizer", on_sigterm=0.25, socket_file="/tmp/d"),
    ]
    assert same(
        shutdown(procs, ["/tmp/b", "/tmp/d"]),
        [
            (0.0, "terminate", "detok"),
            (0.25, "unlink", "/tmp/b"),
        ],
    )


def test_nothing_alive():
    procs = [Proc("TP0", "scheduler", alive=False), Proc("detok", "tokenizer", alive=False)]
    assert same(shutdown(procs, ["/tmp/x"]), [(0.0, "unlink", "/tmp/x")])
    assert same(shutdown([], []), [])


def test_scheduler_exits_immediately():
    procs = [Proc("TP0", "scheduler", on_exit_msg=0.0, socket_file="/tmp/b")]
    assert same(
        shutdown(procs, ["/tmp/b"]),
        [
            (0.0, "send", "ExitMsg"),
            (0.0, "close", "exit sender"),
        ],
    )


def test_tokenizer_does_not_react_to_exit_msg():
    procs = [
        Proc("TP0", "scheduler", on_exit_msg=2.0),
        Proc("detok", "tokenizer", on_exit_msg=0.0, on_sigterm=1.0, socket_file="/tmp/d"),
    ]
    assert same(
        shutdown(procs, ["/tmp/d"]),
        [
            (0.0, "send", "ExitMsg"),
            (2.0, "close", "exit sender"),
            (2.0, "terminate", "detok"),
        ],
    )


def test_zero_timeout_and_zero_grace():
    # timeout=0.0：发完 ExitMsg 一刻也不等；grace=0.0：terminate 后不等，除非它当场退出
    procs = [
        Proc("TP0", "scheduler", on_exit_msg=0.5, on_sigterm=0.0, socket_file="/tmp/b"),
        Proc("detok", "tokenizer", on_sigterm=0.25, socket_file="/tmp/d"),
        Proc("tok0", "tokenizer", on_sigterm=0.0, socket_file="/tmp/t"),
    ]
    assert same(
        shutdown(procs, ["/tmp/b", "/tmp/d", "/tmp/t"], timeout=0.0, grace=0.0),
        [
            (0.0, "send", "ExitMsg"),
            (0.0, "close", "exit sender"),
            (0.0, "terminate", "TP0"),
            (0.0, "terminate", "detok"),
            (0.0, "terminate", "tok0"),
            (0.0, "kill", "detok"),
            (0.0, "unlink", "/tmp/d"),
        ],
    )


def test_times_are_floats():
    # 时间从 0.0 开始，是 float；返回的每个动作是 (float, str, str) 的元组
    actions = shutdown([Proc("detok", "tokenizer", on_sigterm=None)], ["/tmp/x"], grace=2.0)
    assert same(
        actions, [(0.0, "terminate", "detok"), (2.0, "kill", "detok"), (2.0, "unlink", "/tmp/x")]
    )
    assert all(type(t) is float for t, _, _ in actions)
