"""051 的可见测试：题面里的示例。"""

from solution import Frontend, Reply, error_body

REASON = "backend process minisgl-TP0-scheduler exited unexpectedly (exit code -9)"


def test_example():
    f = Frontend()
    assert f.health() == (200, {"status": "ok"})
    assert f.submit(1, stream=True) is None
    assert f.submit(2, stream=False) is None
    assert f.submit(3, stream=False) is None
    assert f.deliver(1, Reply("Hel")) is True
    assert f.deliver(2, Reply("x")) is True
    assert f.fail(REASON) == [1, 2, 3]
    event = {"error": {"message": REASON, "type": "internal_error", "code": 503}}
    assert f.result(1) == (200, ["Hel", event])
    assert f.result(2) == (503, error_body(503, REASON))
    assert f.result(3) == (503, error_body(503, REASON))
    assert f.health() == (503, error_body(503, REASON))
    assert f.submit(4, stream=True) == (
        503,
        error_body(503, "the server is unavailable: " + REASON),
    )
    assert f.deliver(1, Reply("lo")) is False
    assert f.fail("another") == []
