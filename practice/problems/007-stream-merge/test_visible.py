"""007 的可见测试。"""

from solution import merge_stream


def _error_message(items):
    try:
        result = list(merge_stream(items))
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"应当抛出 ValueError，实际得到 {result!r}")


def test_example():
    items = [
        ("embed", [[0]]),
        ("l0.k_proj.weight", [[2]]),
        ("l0.o_proj.weight", [[9]]),
        ("l0.q_proj.weight", [[1], [1]]),
        ("l0.v_proj.weight", [[3]]),
    ]
    assert list(merge_stream(items)) == [
        ("embed", [[0]]),
        ("l0.o_proj.weight", [[9]]),
        ("l0.qkv_proj.weight", [[1], [1], [2], [3]]),
    ]


def test_gate_up_order():
    items = [("mlp.up_proj.weight", ["u"]), ("mlp.gate_proj.weight", ["g"])]
    assert list(merge_stream(items)) == [("mlp.gate_up_proj.weight", ["g", "u"])]


def test_duplicate():
    message = _error_message([("a.q_proj.weight", [1]), ("a.q_proj.weight", [1])])
    assert "a.q_proj.weight" in message, message


def test_incomplete_group():
    message = _error_message([("a.q_proj.weight", [1]), ("a.k_proj.weight", [2])])
    assert "a.v_proj.weight" in message, message
