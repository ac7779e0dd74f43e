"""034 的可见测试。"""

from solution import Event, Stream


def test_example():
    s = Stream()
    log = []
    s.submit(lambda: log.append("a"))
    e = Event()
    e.record(s)
    s.submit(lambda: log.append("b"))
    assert (log, e.query(), s.pending()) == ([], False, 2)
    e.synchronize()
    assert (log, e.query(), s.pending()) == (["a"], True, 1)
    s.synchronize()
    assert (log, s.pending()) == (["a", "b"], 0)


def test_query_runs_nothing():
    s = Stream()
    log = []
    s.submit(lambda: log.append(1))
    e = Event()
    e.record(s)
    for _ in range(3):
        assert e.query() is False
    assert log == []


def test_overlap_loop():
    engine = Stream("engine")
    device = {"tok": 1}
    host = {}

    def forward(step):
        def run():
            device["tok"] = device["tok"] * 3 % 11
            host[step] = device["tok"]

        return run

    events, seen = [], []
    for step in range(3):
        engine.submit(forward(step))
        e = Event()
        e.record(engine)
        events.append(e)
        if step > 0:
            events[step - 1].synchronize()
            seen.append((step - 1, host[step - 1], events[step].query()))
    events[-1].synchronize()
    seen.append((2, host[2], True))
    assert seen == [(0, 3, False), (1, 9, False), (2, 5, True)]


def test_wait_event_across_streams():
    a, b = Stream("a"), Stream("b")
    log = []
    a.submit(lambda: log.append("a1"))
    e = Event()
    e.record(a)
    a.submit(lambda: log.append("a2"))
    b.wait_event(e)
    b.submit(lambda: log.append("b1"))
    b.synchronize()
    assert log == ["a1", "b1"]
    assert a.pending() == 1
