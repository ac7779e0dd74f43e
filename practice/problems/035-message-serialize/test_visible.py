"""035 的可见测试。"""

from array import array
from dataclasses import dataclass

from solution import DecodeError, deserialize, serialize


@dataclass
class Params:
    temperature: float = 0.0
    max_tokens: int = 16


@dataclass
class UserMsg:
    uid: int
    input_ids: array
    params: Params


REGISTRY = {"UserMsg": UserMsg, "Params": Params}


def _raises(exc_type, func, *args):
    try:
        value = func(*args)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_example_round_trip():
    msg = UserMsg(7, array("i", [9707, 11]), Params(0.6))
    d = serialize(msg)
    assert list(d) == ["__type__", "uid", "input_ids", "params"]
    assert d["__type__"] == "UserMsg" and d["uid"] == 7
    assert d["input_ids"] == {
        "__type__": "Array",
        "typecode": "i",
        "buffer": array("i", [9707, 11]).tobytes(),
    }
    assert d["params"] == {"__type__": "Params", "temperature": 0.6, "max_tokens": 16}
    assert deserialize(REGISTRY, d) == msg


def test_plain_dict_and_errors():
    assert deserialize(REGISTRY, {"uid": 1}) == {"uid": 1}
    _raises(DecodeError, deserialize, REGISTRY, {"__type__": "Exit"})
    _raises(DecodeError, deserialize, REGISTRY, {"__type__": "Params", "top_k": 1})
    _raises(DecodeError, deserialize, REGISTRY, {"__type__": "UserMsg", "uid": 1})
