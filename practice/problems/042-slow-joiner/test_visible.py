"""042 的可见测试。"""

from solution import deliveries, ready_time, xpub_notifications

EVENTS = [("sub", "r1", b""), ("sub", "r2", b""), ("close", "r1")]
JOINS = [
    (0.1, "sub", "r1", b""),
    (0.2, "sub", "r2", b""),
    (0.2, "close", "r1"),
    (0.3, "sub", "r3", b""),
]


def _raises(exc_type, func, *args, **kwargs):
    try:
        value = func(*args, **kwargs)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_notifications_example():
    assert xpub_notifications(EVENTS) == [b"\x01"]
    assert xpub_notifications(EVENTS, verbose=True) == [b"\x01", b"\x01"]
    assert xpub_notifications(EVENTS, verboser=True) == [b"\x01", b"\x01", b"\x00"]


def test_ready_time_example():
    assert ready_time(JOINS, 2, verboser=True) == 0.3
    assert ready_time(JOINS, 2, verbose=True) == 0.2
    _raises(TimeoutError, ready_time, JOINS, 2)


def test_deliveries_example():
    subs = [("rank1", "", 0.5), ("rank2", "", 2.0)]
    msgs = [(0.0, "req 0"), (1.0, "req 1"), (3.0, "req 2")]
    assert deliveries(subs, msgs) == {"rank1": ["req 1", "req 2"], "rank2": ["req 2"]}
    everything = ["req 0", "req 1", "req 2"]
    assert deliveries(subs, msgs, wait_for=2) == {"rank1": everything, "rank2": everything}
