"""037 的隐藏测试：重复的订阅、退订、别的主题、不多读、超时的消息、坏的通知。"""

from solution import SubscriberCounter


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
    except exc_type as e:
        return e
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_duplicate_subscriptions_each_count():
    c = SubscriberCounter()
    assert same(c.wait(iter([b"\x01"] * 5), 5), 5)
    assert same(c.count, 5)


def test_unsubscribe_is_subtracted():
    c = SubscriberCounter()
    for note in [b"\x01", b"\x01", b"\x00", b"\x01", b"\x00", b"\x00"]:
        c.feed(note)
    assert same(c.count, 0)
    notes = iter([b"\x01", b"\x00", b"\x01", b"\x01"])
    assert same(c.wait(notes, 2), 4)


def test_other_topics_are_ignored():
    c = SubscriberCounter()
    for note in [b"\x01a", b"\x01ab", b"\x00a", b"\x00zzz"]:
        c.feed(note)
    assert same(c.count, 0)
    t = SubscriberCounter(topic=b"rank")
    for note in [b"\x01", b"\x01rank", b"\x01ranks", b"\x01rank"]:
        t.feed(note)
    assert same(t.count, 2)
    t.feed(b"\x00")  # 空主题的退订，和 b"rank" 无关
    assert same(t.count, 2)


def test_stops_exactly_when_enough():
    c = SubscriberCounter()
    notes = iter([b"\x01", b"\x01", b"\x01", b"\x00", b"\x01"])
    assert same(c.wait(notes, 2), 2)
    third = next(notes)
    assert same(third, b"\x01")  # 第 3 条留在迭代器里
    c.feed(third)
    assert same(c.wait(notes, 3), 0)
    d = SubscriberCounter()
    notes = iter([b"\x01", b"\x01", b"\x00", b"\x01", b"\x01", b"\x01"])
    assert same(d.wait(notes, 3), 5)  # 1、2、退订剩 1、2、3
    assert same(next(notes), b"\x01")


def test_already_enough_takes_nothing():
    c = SubscriberCounter()
    notes = iter([b"\x01"])
    assert same(c.wait(notes, 0), 0)
    assert same(c.wait(notes, -3), 0)
    assert same(next(notes), b"\x01")


def test_timeout_says_how_many_came():
    c = SubscriberCounter()
    e = _raises(TimeoutError, c.wait, iter([b"\x01", b"\x01x"]), 2)
    assert "1 of 2" in str(e)
    assert same(c.count, 1)  # 已经读到的通知算数
    e = _raises(TimeoutError, c.wait, iter([]), 1_000)
    assert "1 of 1000" in str(e)
    assert same(c.wait(iter([b"\x01"]), 2), 1)  # 之后来的订阅者接着数


def test_count_survives_between_waits():
    c = SubscriberCounter()
    assert same(c.wait(iter([b"\x01", b"\x01"]), 2), 2)
    assert same(c.wait(iter([b"\x01"]), 3), 1)
    assert same(c.count, 3)


def test_bad_notifications():
    c = SubscriberCounter()
    c.feed(b"\x01")
    for bad in [b"", b"\x02", b"\xff", b"subscribe"]:
        _raises(ValueError, c.feed, bad)
        assert same(c.count, 1)
    c.feed(b"\x00")
    _raises(ValueError, c.feed, b"\x00")  # 退订比订阅多
    assert same(c.count, 0)
    _raises(ValueError, c.wait, iter([b"\x01", b"\x03"]), 2)
