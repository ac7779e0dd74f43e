"""035 的隐藏测试：嵌套、字段顺序、tuple、各种数组、坏数据都要 DecodeError、不能序列化的东西。"""

from array import array
from dataclasses import dataclass, field, fields, is_dataclass

from solution import DecodeError, deserialize, serialize


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
    if is_dataclass(expected):  # 逐个字段比：Params(0) 和 Params(0.0) 不一样
        return all(
            same(getattr(actual, f.name), getattr(expected, f.name)) for f in fields(expected)
        )
    return bool(expected == actual)


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
        assert same(serialize(v), v)  # True 不能变成 1，b"" 不能变成 ""
        assert same(deserialize(REGISTRY, v), v)
        assert type(deserialize(REGISTRY, v)) is type(v)


def test_field_order_is_declaration_order():
    d = serialize(Params(max_tokens=3, temperature=0.5))
    assert same(list(d), ["__type__", "temperature", "max_tokens"])
    assert same(list(serialize(Exit())), ["__type__"])


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
    assert same(d["data"][1], {"__type__": "Abort", "uid": 2})
    assert same(d["data"][3]["data"][0], {"__type__": "Batch", "data": []})
    back = deserialize(REGISTRY, d)
    assert same(back, msg)
    assert type(back.data[3].data[0]) is Batch


def test_tuple_becomes_list_and_dicts_are_copied():
    d = serialize(Chat(1, ("a", (1, 2)), []))
    assert same(d["text"], ["a", [1, 2]])
    inner = {"k": Params()}
    s = serialize(inner)
    assert same(s, {"k": {"__type__": "Params", "temperature": 0.0, "max_tokens": 16}})
    assert same(inner["k"], Params())  # 原来的 dict 没被改掉
    assert same(deserialize(REGISTRY, s), inner)


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
        assert same(d, {"__type__": "Array", "typecode": typecode, "buffer": a.tobytes()})
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
    assert same(deserialize(REGISTRY, {"__type__": "Params"}), Params())
    assert same(deserialize(REGISTRY, {"__type__": "Chat", "uid": 1, "text": "t"}), Chat(1, "t"))


def test_bad_arrays():
    good = {"__type__": "Array", "typecode": "i", "buffer": array("i", [1, 2]).tobytes()}
    _decode_error({**good, "typecode": "x"})
    _decode_error({**good, "typecode": 5})
    for typecode in ["", "iI", "ii", "I ", "整"]:  # typecodes 是一个字符串：子串不算
        _decode_error({**good, "typecode": typecode})
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
