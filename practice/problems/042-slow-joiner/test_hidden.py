"""042 的隐藏测试：主题合并、重复订阅、按顺序退订、同一时刻一起检查、前缀过滤、推迟发送。"""

from solution import deliveries, ready_time, xpub_notifications


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


def _raises(exc_type, func, *args, **kwargs):
    try:
        value = func(*args, **kwargs)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_distinct_topics_are_not_merged():
    events = [("sub", "a", b"req"), ("sub", "b", b"abort"), ("sub", "c", b"req")]
    assert same(xpub_notifications(events), [b"\x01req", b"\x01abort"])
    assert same(xpub_notifications(events, verbose=True), [b"\x01req", b"\x01abort", b"\x01req"])


def test_duplicate_subscription_of_the_same_subscriber():
    events = [("sub", "a", b""), ("sub", "a", b""), ("unsub", "a", b"")]
    # 非 verbose：第二次订阅不通知；唯一的订阅者退订，主题空了，通知
    assert same(xpub_notifications(events), [b"\x01", b"\x00"])
    # verbose：重复的订阅也通知，但记录里 a 只有一次，退订一次就空了
    assert same(xpub_notifications(events, verbose=True), [b"\x01", b"\x01", b"\x00"])
    # 再退订一次：a 已经不在了，什么也不发
    assert same(
        xpub_notifications(events + [("unsub", "a", b"")], verboser=True),
        [
            b"\x01",
            b"\x01",
            b"\x00",
        ],
    )


def test_unsubscribe_of_unknown_and_close_of_unknown():
    assert same(xpub_notifications([("unsub", "x", b"t"), ("close", "y")], verboser=True), [])
    assert same(
        xpub_notifications([("sub", "a", b"t"), ("unsub", "b", b"t")], verboser=True), [b"\x01t"]
    )


def test_close_unsubscribes_in_subscription_order():
    events = [
        ("sub", "a", b"z"),
        ("sub", "a", b"m"),
        ("sub", "b", b"m"),
        ("sub", "a", b"a"),
        ("close", "a"),
    ]
    assert same(xpub_notifications(events), [b"\x01z", b"\x01m", b"\x01a", b"\x00z", b"\x00a"])
    assert same(
        xpub_notifications(events, verboser=True),
        [
            b"\x01z",
            b"\x01m",
            b"\x01m",
            b"\x01a",
            b"\x00z",
            b"\x00m",
            b"\x00a",
        ],
    )
    # a 断开后再订阅：又是一个新的订阅
    assert same(xpub_notifications(events + [("sub", "a", b"z")])[-1], b"\x01z")


def test_non_verbose_count_undercounts_subscribers():
    """不开 VERBOSE，三个 rank 订阅同一个主题只有一条通知：按通知数等 3 个人会永远等下去。"""
    joins = [(float(r), "sub", f"rank{r}", b"") for r in (1, 2, 3)]
    _raises(TimeoutError, ready_time, joins, 3)
    _raises(TimeoutError, ready_time, joins, 2)
    assert same(ready_time(joins, 3, verbose=True), 3.0)
    assert same(ready_time(joins, 1), 1.0)


def test_same_instant_is_checked_as_a_whole():
    # 同一时刻两人订阅、一人断开：整批读完只有 1 个，不能宣布到齐
    joins = [
        (1.0, "sub", "a", b""),
        (1.0, "sub", "b", b""),
        (1.0, "close", "a"),
        (2.0, "sub", "c", b""),
    ]
    assert same(ready_time(joins, 2, verboser=True), 2.0)
    # 不同时刻：1.5 那一刻已经有两个，之后 a 走了也不影响"当时到齐"
    joins = [(1.0, "sub", "a", b""), (1.5, "sub", "b", b""), (1.7, "close", "a")]
    assert same(ready_time(joins, 2, verboser=True), 1.5)


def test_ready_time_counts_every_topic_and_leaves():
    joins = [
        (0.0, "sub", "a", b"x"),
        (1.0, "sub", "a", b"y"),
        (2.0, "unsub", "a", b"x"),
        (3.0, "sub", "b", b"x"),
    ]
    # 每个主题的通知都算：1.0 时已经有两条订阅通知
    assert same(ready_time(joins, 2), 1.0)
    # a 退订 x：verboser 时通知，计数回到 1；b 再订阅 x 又是 2，够不到 3
    _raises(TimeoutError, ready_time, joins, 3, verboser=True)
    # 不开 verboser：a 是 x 唯一的订阅者，退订照样通知（主题空了）；b 订阅 x 时 x 已空，也通知
    _raises(TimeoutError, ready_time, joins, 3)
    # 合并之后的退订：a、b 都订阅 b""，a 断开不通知（还有 b），b 断开才通知
    leave = [
        (0.0, "sub", "a", b""),
        (0.0, "sub", "b", b""),
        (1.0, "close", "a"),
        (2.0, "close", "b"),
    ]
    assert same(xpub_notifications([e[1:] for e in leave]), [b"\x01", b"\x00"])
    _raises(TimeoutError, ready_time, [], 1)


def test_prefix_filtering():
    subs = [("all", "", 0.0), ("req", "req", 0.0), ("abort", "abort", 0.0), ("late", "req", 5.0)]
    msgs = [(1.0, "req 1"), (2.0, "abort 1"), (6.0, "request 2"), (7.0, "re")]
    assert same(
        deliveries(subs, msgs),
        {
            "all": ["req 1", "abort 1", "request 2", "re"],
            "req": ["req 1", "request 2"],
            "abort": ["abort 1"],
            "late": ["request 2"],
        },
    )


def test_active_at_boundary_is_inclusive():
    assert same(deliveries([("a", "", 1.0)], [(1.0, "x"), (0.999, "y")]), {"a": ["x"]})


def test_wait_for_nth_active_subscriber():
    subs = [("r1", "", 3.0), ("r2", "", 1.0), ("r3", "", 2.0)]
    msgs = [(0.0, "m0"), (1.5, "m1"), (2.5, "m2"), (4.0, "m3")]
    assert same(
        deliveries(subs, msgs), {"r1": ["m3"], "r2": ["m1", "m2", "m3"], "r3": ["m2", "m3"]}
    )
    # 等到第 2 个订阅（t=2.0）：m0、m1 推迟到 2.0，发给此刻在的 r2、r3；r1 仍然错过
    assert same(
        deliveries(subs, msgs, wait_for=2),
        {
            "r1": ["m3"],
            "r2": ["m0", "m1", "m2", "m3"],
            "r3": ["m0", "m1", "m2", "m3"],
        },
    )
    full = ["m0", "m1", "m2", "m3"]
    assert same(deliveries(subs, msgs, wait_for=3), {"r1": full, "r2": full, "r3": full})
    _raises(TimeoutError, deliveries, subs, msgs, wait_for=4)


def test_no_subscribers_and_no_messages():
    assert same(deliveries([], [(0.0, "m")]), {})
    assert same(deliveries([("a", "", 0.0)], []), {"a": []})
    _raises(TimeoutError, deliveries, [], [], wait_for=1)


def test_slow_joiner_loses_only_the_first_broadcast():
    """第 14 章的场景：请求在 rank 启动前就排好了，rank 0 一就绪就转发第一条。"""
    subs = [("rank1", "", 0.020)]
    msgs = [(0.001, "user 0"), (0.050, "user 1")]
    assert same(deliveries(subs, msgs), {"rank1": ["user 1"]})
    assert same(deliveries(subs, msgs, wait_for=1), {"rank1": ["user 0", "user 1"]})
