"""036 的隐藏测试：交错的流、事件、结束后删除、中止后的迟到回复、重新登记、出错的用法。"""

import asyncio

from solution import Reply, ReplyRouter


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


def _raises(exc_type, func, *args):
    try:
        value = func(*args)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_register_returns_a_fresh_unset_event():
    router = ReplyRouter()
    e = router.register(5)
    assert isinstance(e, asyncio.Event) and not e.is_set()
    assert same(router.active(), [5])
    assert same(router.dropped, 0)


def test_interleaved_stream_keeps_each_uids_order():
    router = ReplyRouter()
    events = {uid: router.register(uid) for uid in (3, 1, 2)}
    stream = [Reply(uid, f"{uid}:{i}", False) for i in range(5) for uid in (1, 2, 3)]
    router.dispatch(stream[:7])
    router.dispatch(stream[7:])
    assert all(e.is_set() for e in events.values())
    for uid in (1, 2, 3):
        assert same(router.take(uid), ("".join(f"{uid}:{i}" for i in range(5)), False))
        assert not events[uid].is_set()
    assert same(router.active(), [1, 2, 3])
    assert same(router.dropped, 0)


def test_event_only_for_uids_that_got_something():
    router = ReplyRouter()
    e1, e2 = router.register(1), router.register(2)
    router.dispatch([Reply(1, "a", False)])
    assert e1.is_set() and not e2.is_set()
    router.dispatch([])
    assert same(router.take(2), ("", False))  # 没有新内容也可以取，得到空串
    assert not e2.is_set()


def test_take_clears_and_collects_everything_since_last_take():
    router = ReplyRouter()
    e = router.register(1)
    router.dispatch([Reply(1, "a", False)])
    router.dispatch([Reply(1, "b", False), Reply(1, "c", False)])
    assert same(router.take(1), ("abc", False))
    assert not e.is_set()
    assert same(router.take(1), ("", False))
    router.dispatch([Reply(1, "d", False)])
    assert e.is_set()
    assert same(router.take(1), ("d", False))


def test_empty_text_counts_and_sets_the_event():
    router = ReplyRouter()
    e = router.register(1)
    router.dispatch([Reply(1, "", True)])
    assert e.is_set()
    assert same(router.take(1), ("", True))
    assert same(router.active(), [])


def test_finished_uid_is_removed_after_take_and_late_replies_dropped():
    router = ReplyRouter()
    router.register(1)
    router.register(2)
    router.dispatch([Reply(1, "x", True), Reply(1, "late", False), Reply(1, "later", True)])
    assert same(router.dropped, 2)
    assert same(router.active(), [1, 2])  # 还没取走，仍然活着
    _raises(ValueError, router.register, 1)
    assert same(router.take(1), ("x", True))
    assert same(router.active(), [2])
    router.dispatch([Reply(1, "after", False)])
    assert same(router.dropped, 3)
    _raises(ValueError, router.take, 1)
    assert same(router.active(), [2])


def test_abort_drops_later_replies_and_never_revives_the_uid():
    router = ReplyRouter()
    e = router.register(4)
    router.dispatch([Reply(4, "a", False)])
    assert router.abort(4) is True
    assert router.abort(4) is False
    assert router.abort(99) is False
    router.dispatch([Reply(4, "b", False), Reply(4, "c", True)])
    assert same(router.dropped, 2)
    assert same(router.active(), [])
    _raises(ValueError, router.take, 4)
    assert e.is_set()  # 中止不会去动旧的事件；只是再也没人理它


def test_reregister_after_finish_or_abort_starts_clean():
    router = ReplyRouter()
    old = router.register(1)
    router.dispatch([Reply(1, "old", False)])
    router.abort(1)
    new = router.register(1)
    assert new is not old and not new.is_set()
    router.dispatch([Reply(1, "new", True)])
    assert same(router.take(1), ("new", True))  # 没有中止前残留的 "old"
    again = router.register(1)
    assert not again.is_set()
    assert same(router.take(1), ("", False))


def test_errors_for_misuse():
    router = ReplyRouter()
    _raises(ValueError, router.take, 1)
    router.register(1)
    _raises(ValueError, router.register, 1)


def test_unknown_uids_are_dropped_without_raising():
    router = ReplyRouter()
    router.register(1)
    router.dispatch([Reply(2, "x", False), Reply(1, "y", False), Reply(3, "z", True)])
    assert same(router.dropped, 2)
    assert same(router.take(1), ("y", False))
    assert same(router.active(), [1])


def test_many_requests():
    router = ReplyRouter()
    for uid in range(100):
        router.register(uid)
    router.dispatch([Reply(uid, str(uid), uid % 2 == 0) for uid in range(100)])
    for uid in range(0, 100, 2):
        assert same(router.take(uid), (str(uid), True))
    assert same(router.active(), list(range(1, 100, 2)))
    for uid in range(1, 100, 2):
        assert router.abort(uid)
    assert router.active() == [] and router.dropped == 0
