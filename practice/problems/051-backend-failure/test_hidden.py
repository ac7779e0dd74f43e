"""051 的隐藏测试：400 与 503、正常结束、只叫醒还在等的、幂等、迟到的回复、先后、参数检查。"""

from solution import Frontend, Reply, error_body


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


REASON = "backend process minisgl-detokenizer exited unexpectedly (exit code -9)"


def error_event(message):
    return {"error": {"message": message, "type": "internal_error", "code": 503}}


def test_rejected_while_healthy_is_400_for_both_shapes():
    f = Frontend()
    f.submit(1, stream=True)
    f.submit(2, stream=False)
    why = "the prompt has 9000 tokens, but the maximum context length is 4096 tokens"
    assert f.deliver(1, Reply("", True, why))
    assert f.deliver(2, Reply("", True, why))
    assert same(f.result(1), (400, error_body(400, why)))
    assert same(f.result(2), (400, error_body(400, why)))
    assert same(f.result(1)[1]["error"]["type"], "invalid_request_error")
    assert same(f.health(), (200, {"status": "ok"}))


def test_normal_completion_stream_and_non_stream():
    f = Frontend()
    f.submit(5, stream=True)
    f.submit(6, stream=False)
    for text in ("a", "", "b"):  # 空文本（半个 UTF-8 字符）不单独成一个事件
        f.deliver(5, Reply(text))
        f.deliver(6, Reply(text))
    assert f.result(5) is None and f.result(6) is None
    f.deliver(5, Reply("c", True))
    f.deliver(6, Reply("", True))
    assert same(f.result(5), (200, ["a", "b", "c", "[DONE]"]))
    assert same(f.result(6), (200, {"text": "ab"}))
    assert same(f.waiting(), [])


def test_single_reply_request():
    f = Frontend()
    f.submit(0, stream=True)
    f.deliver(0, Reply("", True))  # 第一个 token 就是 eos
    assert same(f.result(0), (200, ["[DONE]"]))


def test_fail_only_wakes_requests_still_waiting():
    f = Frontend()
    f.submit(1, stream=False)
    f.submit(2, stream=True)
    f.submit(3, stream=True)
    f.deliver(1, Reply("done", True))
    f.deliver(2, Reply("", True, "rejected"))
    f.deliver(3, Reply("x"))
    before1, before2 = f.result(1), f.result(2)
    assert same(f.waiting(), [3])
    assert same(f.fail(REASON), [3])
    assert same(f.result(1), before1) and same(before1, (200, {"text": "done"}))
    assert same(f.result(2), before2) and same(before2, (400, error_body(400, "rejected")))
    assert same(f.result(3), (200, ["x", error_event(REASON)]))
    assert same(f.waiting(), [])


def test_stream_failing_before_the_first_reply_gets_503_not_events():
    f = Frontend()
    f.submit(8, stream=True)
    assert same(f.fail(REASON), [8])
    assert same(f.result(8), (503, error_body(503, REASON)))


def test_fail_is_idempotent():
    f = Frontend()
    f.submit(1, stream=True)
    assert same(f.fail(REASON), [1])
    first = f.result(1)
    assert same(f.fail("something else"), [])
    assert same(f.failure, REASON)  # 原因以第一次为准
    assert same(f.fail(REASON), [])
    assert same(f.result(1), first)
    assert same(f.health(), (503, error_body(503, REASON)))
    assert f.submit(2, stream=False)[1]["error"]["message"].endswith(REASON)


def test_fail_without_waiters_still_marks_the_failure():
    f = Frontend()
    assert same(f.fail(REASON), [])
    assert same(f.failure, REASON)
    assert same(f.health()[0], 503)
    status, body = f.submit(1, stream=False)
    assert status == 503 and body["error"]["type"] == "internal_error"
    try:
        f.result(1)  # 被拒绝的请求没有登记
    except KeyError:
        pass
    else:
        raise AssertionError("result() of an unregistered uid must raise KeyError")


def test_late_and_unknown_replies_are_dropped():
    f = Frontend()
    f.submit(1, stream=False)
    f.fail(REASON)
    assert f.deliver(1, Reply("ghost", True)) is False
    assert f.deliver(1, Reply("", True, "again")) is False
    assert f.deliver(99, Reply("who?")) is False
    assert same(f.result(1), (503, error_body(503, REASON)))


def test_wake_order_follows_submission():
    f = Frontend()
    for uid in (9, 3, 7, 4):
        f.submit(uid, stream=uid % 2 == 0)
    f.deliver(7, Reply("z", True))
    assert same(f.waiting(), [9, 3, 4])
    assert same(f.fail(REASON), [9, 3, 4])


def test_mid_generation_error_while_healthy():
    f = Frontend()
    f.submit(1, stream=False)
    f.submit(2, stream=True)
    f.deliver(1, Reply("a"))
    f.deliver(2, Reply("a"))
    f.deliver(1, Reply("", True, "oops"))
    f.deliver(2, Reply("", True, "oops"))
    assert same(f.result(1), (503, error_body(503, "oops")))
    assert same(f.result(2), (200, ["a", error_event("oops")]))
    assert f.failure is None


def test_duplicate_and_unknown_uid():
    f = Frontend()
    f.submit(1, stream=True)
    try:
        f.submit(1, stream=False)
    except ValueError:
        pass
    else:
        raise AssertionError("a duplicate uid must raise ValueError")
    f.deliver(1, Reply("", True))
    try:
        f.submit(1, stream=True)  # 结束了也不能再用
    except ValueError:
        pass
    else:
        raise AssertionError("a finished uid must not be reused")
    try:
        f.result(2)
    except KeyError:
        pass
    else:
        raise AssertionError("result() of an unknown uid must raise KeyError")
