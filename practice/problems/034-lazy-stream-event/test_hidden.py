"""034 的隐藏测试：顺序与恰好一次、没 record 的 event、重新 record、wait_event 用当时的记录点、
等待链、漏掉同步的循环会被发现、和同步循环结果相同。"""

import random

from solution import Event, Stream


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


def recorder(log, name):
    return lambda: log.append(name)


def test_fifo_and_exactly_once():
    s = Stream()
    log = []
    events = []
    for i in range(5):
        s.submit(recorder(log, i))
        e = Event()
        e.record(s)
        events.append(e)
    events[2].synchronize()
    assert same(log, [0, 1, 2])
    events[1].synchronize()
    events[2].synchronize()
    assert same(log, [0, 1, 2])
    assert same([e.query() for e in events], [True, True, True, False, False])
    assert same(s.pending(), 2)
    s.synchronize()
    s.synchronize()
    events[4].synchronize()
    assert same(log, [0, 1, 2, 3, 4])
    assert same(s.pending(), 0)


def test_unrecorded_event():
    e = Event()
    assert e.query() is True
    e.synchronize()
    s = Stream()
    log = []
    s.wait_event(e)  # 没 record 过：不建立等待
    s.submit(recorder(log, "x"))
    s.synchronize()
    assert same(log, ["x"])


def test_event_recorded_before_any_work():
    s = Stream()
    e = Event()
    e.record(s)
    assert e.query() is True
    log = []
    s.submit(recorder(log, 1))
    assert e.query() is True
    e.synchronize()
    assert same(log, [])


def test_record_again_moves_the_mark():
    s, t = Stream(), Stream()
    log = []
    s.submit(recorder(log, "s1"))
    e = Event()
    e.record(s)
    s.submit(recorder(log, "s2"))
    e.record(s)
    assert e.query() is False
    t.submit(recorder(log, "t1"))
    e.record(t)  # 换到另一条流上
    e.synchronize()
    assert same(log, ["t1"])
    assert same(s.pending(), 2)


def test_wait_uses_the_mark_at_call_time():
    a, b = Stream("a"), Stream("b")
    log = []
    a.submit(recorder(log, "a1"))
    e = Event()
    e.record(a)
    b.wait_event(e)
    a.submit(recorder(log, "a2"))
    e.record(a)  # 之后再 record：已经建立的等待不受影响
    b.submit(recorder(log, "b1"))
    b.synchronize()
    assert same(log, ["a1", "b1"])
    assert e.query() is False


def test_work_before_the_wait_does_not_wait():
    a, b = Stream("a"), Stream("b")
    log = []
    b.submit(recorder(log, "b0"))
    early = Event()
    early.record(b)  # 只覆盖 b0
    a.submit(recorder(log, "a1"))
    e = Event()
    e.record(a)
    b.wait_event(e)
    b.submit(recorder(log, "b1"))
    early.synchronize()
    assert same(log, ["b0"])  # b0 在等待之前提交：不需要运行 a
    b.synchronize()
    assert same(log, ["b0", "a1", "b1"])


def test_event_sync_runs_dependencies_only_up_to_their_marks():
    a, b = Stream("a"), Stream("b")
    log = []
    a.submit(recorder(log, "a1"))
    ea = Event()
    ea.record(a)
    a.submit(recorder(log, "a2"))
    b.submit(recorder(log, "b1"))
    b.wait_event(ea)
    b.submit(recorder(log, "b2"))
    eb = Event()
    eb.record(b)
    b.submit(recorder(log, "b3"))
    eb.synchronize()
    assert same(log, ["b1", "a1", "b2"])
    assert same((a.pending(), b.pending()), (1, 1))
    assert ea.query() is True and eb.query() is True


def test_chain_of_waits_back_and_forth():
    a, b, c = Stream("a"), Stream("b"), Stream("c")
    log = []
    a.submit(recorder(log, "a1"))
    e1 = Event()
    e1.record(a)
    b.wait_event(e1)
    b.submit(recorder(log, "b1"))
    e2 = Event()
    e2.record(b)
    a.wait_event(e2)  # a 的后续等 b，b 又等 a 的前面——不是环
    a.submit(recorder(log, "a2"))
    c.wait_event(e2)
    c.submit(recorder(log, "c1"))
    e3 = Event()
    e3.record(a)
    c.wait_event(e3)
    c.submit(recorder(log, "c2"))
    c.synchronize()
    assert same(log, ["a1", "b1", "c1", "a2", "c2"])
    assert a.pending() == b.pending() == c.pending() == 0


def _overlap_loop(n_steps, sync):
    engine = Stream("engine")
    device = {"tok": 1}
    host = {}
    order = []

    def forward(step):
        def run():
            order.append(("forward", step))
            device["tok"] = (device["tok"] * 7 + step) % 1009
            host[step] = device["tok"]

        return run

    outputs, events = [], []
    for step in range(n_steps):
        engine.submit(forward(step))
        e = Event()
        e.record(engine)
        events.append(e)
        if step > 0:
            if sync:
                events[step - 1].synchronize()
            order.append(("process", step - 1, engine.pending()))
            outputs.append(host[step - 1])
    if sync:
        events[-1].synchronize()
    order.append(("process", n_steps - 1, engine.pending()))
    outputs.append(host[n_steps - 1])
    return outputs, order


def _sync_loop(n_steps):
    tok, outputs = 1, []
    for step in range(n_steps):
        tok = (tok * 7 + step) % 1009
        outputs.append(tok)
    return outputs


def test_overlap_loop_matches_the_plain_loop():
    for n in (1, 2, 5, 12):
        outputs, order = _overlap_loop(n, sync=True)
        assert same(outputs, _sync_loop(n))
        # 处理第 N-1 步时，第 N 步已经提交、还没有运行（pending 为 1）
        want = []
        for step in range(n):
            want.append(("forward", step))
            want.append(("process", step, 1 if step < n - 1 else 0))
        assert same(order, want)


def test_missing_synchronize_is_caught():
    caught = False
    try:
        outputs, _ = _overlap_loop(4, sync=False)
        caught = outputs != _sync_loop(4)
    except KeyError:
        caught = True
    assert caught, "漏掉 synchronize 的循环应当读不到结果，但它读到了"


def test_random_programs_against_a_simple_model():
    rng = random.Random(34)
    for _ in range(200):
        streams = [Stream(str(i)) for i in range(3)]
        events = [Event() for _ in range(3)]
        log = []
        submitted = {i: [] for i in range(3)}
        counter = 0
        for _ in range(rng.randint(1, 25)):
            i = rng.randrange(3)
            op = rng.random()
            if op < 0.5:
                name = f"w{counter}"
                counter += 1
                streams[i].submit(recorder(log, name))
                submitted[i].append(name)
            elif op < 0.7:
                events[rng.randrange(3)].record(streams[i])
            elif op < 0.8:
                streams[i].wait_event(events[rng.randrange(3)])
            elif op < 0.9:
                before = list(log)
                q = events[rng.randrange(3)].query()
                assert log == before and q in (True, False)
            else:
                events[rng.randrange(3)].synchronize()
            # 不变量：每条流上运行过的是它提交的工作的一个前缀；没有重复；pending 对得上
            ran = set(log)
            assert same(len(ran), len(log))
            for j in range(3):
                done = [w for w in submitted[j] if w in ran]
                assert same(done, submitted[j][: len(done)])
                assert same(streams[j].pending(), len(submitted[j]) - len(done))
        for s in streams:
            s.synchronize()
        assert same(sorted(log), sorted(w for ws in submitted.values() for w in ws))
        assert all(e.query() for e in events)
