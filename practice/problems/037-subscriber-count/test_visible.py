"""037 的可见测试。"""

from solution import SubscriberCounter


def _raises(exc_type, func, *args):
    try:
        value = func(*args)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_example():
    c = SubscriberCounter()
    notes = iter([b"\x01", b"\x01topic", b"\x01", b"\x00", b"\x01", b"\x01"])
    assert c.wait(notes, 2) == 3
    assert c.count == 2
    assert c.wait(notes, 2) == 0
    assert c.wait(notes, 3) == 3
    assert c.count == 3
    _raises(TimeoutError, c.wait, iter([]), 4)
    _raises(ValueError, c.feed, b"\x02")
