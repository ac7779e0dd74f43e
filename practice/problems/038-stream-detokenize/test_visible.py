"""038 的可见测试。"""

from solution import Detokenizer

TABLE = {i: bytes([i]) for i in range(256)}
TABLE |= {300: b"Hi", 301: b" \xe5", 302: b"\xe8\xae", 303: b"\xa2\xe5\x8d\x95", 399: b""}


def test_example():
    d = Detokenizer(TABLE, stop_ids={399})
    assert d.step([(0, 300, False), (1, 0xF0, False)]) == ["Hi", ""]
    assert d.step([(0, 301, False)]) == [" "]
    assert d.step([(0, 0xA5, False), (0, 0xBD, False)]) == ["", "好"]
    assert d.step([(0, 302, False), (0, 303, False)]) == ["", "订单"]
    assert d.step([(0, 399, True)]) == [""]
    assert d.active() == 1
    assert d.step([(1, 0x9F, False), (1, -1, True)]) == ["", "\ufffd"]
    assert d.active() == 0


def test_chinese_one_byte_per_token():
    d = Detokenizer(TABLE, stop_ids=set())
    data = "你好".encode()
    parts = d.step([(0, b, i == len(data) - 1) for i, b in enumerate(data)])
    assert parts == ["", "", "你", "", "", "好"]


def test_stop_token_is_not_text():
    d = Detokenizer(TABLE, stop_ids={ord(".")})
    assert d.step([(0, ord("a"), False), (0, ord("."), False), (0, ord("."), True)]) == [
        "a",
        ".",
        "",
    ]
