"""035 的隐藏测试：嵌套、字段顺序、tuple、各种数组、坏数据都要 DecodeError、不能序列化的东西。"""

from array import array
from dataclasses import dataclass, field

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


@dataclass
class Abort:
    uid: int


@dataclass
class Exit:
    pass


@dataclass
class Batch:
    data: list


@dataclass
class Chat:
    uid: int
    text: object  # str 或者 [{"role": ..., "content": ...}]
    tags: list = field(default_factory=list)


REGISTRY = {c.__name__: c for c in (Params, UserMsg, Abort, Exit, Batch, Chat)}


def _raises(exc_type, func, *args):
    try:
        value = func(*args)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def _decode_error(data, registry=REGISTRY):
    try:
        value = deserialize(registry, data)
    except DecodeError as e:
        return str(e)
    raise AssertionError(f"应当抛出 DecodeError，实际返回了 {value!r}")


def test_decode_error_is_a_value_error():
    assert issubclass(DecodeError, ValueError)


def test_primitives_pass_through():
    for v in [None, True, False, 0, -5, 2**40, 1.5, "", "你好", b"", b"\x00\xff"]:
        assert serialize(v) is v or serialize(v) == v
        assert deserialize(REGISTRY, v) == v
        assert type(deserialize(REGISTRY, v)) is type(v)


def test_field_order_is_declaration_order():
    d = serialize(Params(max_tokens=3, temperature=0.5))
    assert list(d) == ["__type__", "temperature", "max_tokens"]
    assert list(serialize(Exit())) == ["__type__"]


def test_nested_batches_round_trip():
    msg = Batch(
        [
            UserMsg(1, array("i", [1, 2, 3]), Params()),
            Abort(2),
            Exit(),
            Batch([Batch([]), Chat(3, [{"role": "user", "content": "hi"}], ["a"])]),
        ]
    )
    d = serialize(msg)
    assert d["data"][1] == {"__type__": "Abort", "uid": 2}
    assert d["data"][3]["data"][0] == {"__type__": "Batch", "data": []}
    back = deserialize(REGISTRY, d)
    assert back == msg
    assert type(back.data[3].data[0]) is Batch


def test_tuple_becomes_list_and_dicts_are_copied():
    d = serialize(Chat(1, ("a", (1, 2)), []))
    assert d["text"] == ["a", [1, 2]]
    inner = {"k": Params()}
    s = serialize(inner)
    assert s == {"k": {"__type__": "Params", "temperature": 0.0, "max_tokens": 16}}
    assert inner["k"] == Params()  # 原来的 dict 没被改掉
    assert deserialize(REGISTRY, s) == inner


def test_arrays_of_several_typecodes():
    for typecode, values in [
        ("i", [0, -1, 2**31 - 1]),
        ("q", [2**62, -(2**62)]),
        ("b", [-128, 127]),
        ("B", [0, 255]),
        ("d", [1.5, -0.0, 1e300]),
        ("f", [0.5, 2.0]),
        ("i", []),
    ]:
        a = array(typecode, values)
        d = serialize(a)
        assert d == {"__type__": "Array", "typecode": typecode, "buffer": a.tobytes()}
        back = deserialize(REGISTRY, d)
        assert isinstance(back, array) and back.typecode == typecode and back == a
        back.append(values[0] if values else 0)  # 是一个新的、可以修改的数组
        assert back != a


def test_unknown_type_names_the_type():
    msg = _decode_error({"__type__": "Reply", "uid": 1})
    assert "Reply" in msg
    assert _decode_error({"__type__": "Abort", "uid": 1}, registry={})  # 空的登记表
    # 嵌套在里面的未知类名也一样
    _decode_error({"__type__": "Batch", "data": [{"__type__": "Nope"}]})
    _decode_error({"__type__": 5})


def test_field_mismatch_is_a_decode_error():
    _decode_error({"__type__": "Abort"})  # 缺 uid
    _decode_error({"__type__": "Abort", "uid": 1, "reason": "x"})  # 多了 reason
    _decode_error({"__type__": "Exit", "uid": 1})
    _decode_error({"__type__": "UserMsg", "uid": 1, "params": {"__type__": "Params"}})
    # 有默认值的字段可以不给
    assert deserialize(REGISTRY, {"__type__": "Params"}) == Params()
    assert deserialize(REGISTRY, {"__type__": "Chat", "uid": 1, "text": "t"}) == Chat(1, "t")


def test_bad_arrays():
    good = {"__type__": "Array", "typecode": "i", "buffer": array("i", [1, 2]).tobytes()}
    _decode_error({**good, "typecode": "x"})
    _decode_error({**good, "typecode": 5})
    _decode_error({**good, "buffer": good["buffer"][:-1]})  # 截断
    _decode_error({**good, "buffer": "abcd"})
    _decode_error({"__type__": "Array", "typecode": "i"})


def test_unexpected_values_in_data():
    _decode_error((1, 2))
    _decode_error({"__type__": "Abort", "uid": {1, 2}})
    _decode_error([1, object()])


def test_only_dataclass_objects_are_serialized():
    class Plain:
        def __init__(self):
            self.x = 1

    _raises(TypeError, serialize, Plain())
    _raises(TypeError, serialize, Params)  # 类本身不是消息
    _raises(TypeError, serialize, {1, 2})
    _raises(TypeError, serialize, Batch([Plain()]))
