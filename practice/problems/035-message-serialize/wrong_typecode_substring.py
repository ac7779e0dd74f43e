"""错误答案：只用 `typecode in typecodes` 检查类型码。

typecodes 是字符串，"" 和 "iI" 这样的子串也能通过，随后 array() 抛的是 TypeError，不是 DecodeError。
"""

from __future__ import annotations

from array import array, typecodes
from dataclasses import MISSING, fields, is_dataclass

PRIMITIVES = (bool, int, float, str, bytes)


class DecodeError(ValueError):
    """收到的数据不是一条合法的消息。"""


def serialize(obj: object) -> object:
    if obj is None or isinstance(obj, PRIMITIVES):
        return obj
    if isinstance(obj, (list, tuple)):
        return [serialize(v) for v in obj]
    if isinstance(obj, dict):
        return {k: serialize(v) for k, v in obj.items()}
    if isinstance(obj, array):
        return {"__type__": "Array", "typecode": obj.typecode, "buffer": obj.tobytes()}
    if is_dataclass(obj) and not isinstance(obj, type):
        result: dict[str, object] = {"__type__": type(obj).__name__}
        for f in fields(obj):
            result[f.name] = serialize(getattr(obj, f.name))
        return result
    raise TypeError(f"cannot serialize {type(obj).__name__}")


def _array(data: dict) -> array:
    typecode, buffer = data.get("typecode"), data.get("buffer")
    if not isinstance(typecode, str) or typecode not in typecodes:  # 错在这里：子串也算"在里面"
        raise DecodeError(f"unknown array typecode {typecode!r}")
    if not isinstance(buffer, bytes):
        raise DecodeError("array buffer must be bytes")
    out = array(typecode)
    if len(buffer) % out.itemsize:
        raise DecodeError(f"{len(buffer)} bytes is not a whole number of {typecode!r} items")
    out.frombytes(buffer)
    return out


def _object(registry: dict[str, type], data: dict) -> object:
    name = data["__type__"]
    cls = registry.get(name) if isinstance(name, str) else None
    if cls is None:
        raise DecodeError(f"unknown type {name!r}")
    declared = {f.name: f for f in fields(cls) if f.init}
    given = set(data) - {"__type__"}
    extra = sorted(given - set(declared))
    missing = sorted(
        n
        for n, f in declared.items()
        if n not in given and f.default is MISSING and f.default_factory is MISSING
    )
    if extra or missing:
        raise DecodeError(f"{name}: unexpected fields {extra}, missing fields {missing}")
    return cls(**{k: deserialize(registry, data[k]) for k in given})


def deserialize(registry: dict[str, type], data: object) -> object:
    if isinstance(data, dict):
        if "__type__" not in data:
            return {k: deserialize(registry, v) for k, v in data.items()}
        if data["__type__"] == "Array":
            return _array(data)
        return _object(registry, data)
    if isinstance(data, list):
        return [deserialize(registry, v) for v in data]
    if data is None or isinstance(data, PRIMITIVES):
        return data
    raise DecodeError(f"unexpected {type(data).__name__} in a message")
