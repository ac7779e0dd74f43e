"""036 的可见测试。"""

from solution import Reply, ReplyRouter


def test_example():
    router = ReplyRouter()
    e1 = router.register(1)
    e2 = router.register(2)
    assert not e1.is_set() and not e2.is_set()
    router.dispatch([Reply(1, "你", False), Reply(2, "Hi", False), Reply(1, "好", False)])
    assert e1.is_set() and e2.is_set()
    assert router.take(1) == ("你好", False)
    assert not e1.is_set()
    router.dispatch([Reply(2, "!", True), Reply(2, "?", False)])
    assert router.take(2) == ("Hi!", True)
    assert router.abort(1) is True
    router.dispatch([Reply(1, "迟到的", False), Reply(7, "没人要", True)])
    assert router.dropped == 3
    assert router.active() == []
