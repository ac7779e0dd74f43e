"""消息的通用序列化：dataclass ↔ 只由基本类型组成的 dict，再交给 msgpack 变成字节。

规则只有三条：

- dataclass 对象 → ``{"__type__": 类名, 字段名: 值, ...}``，字段按声明的顺序，值递归处理；
- 1 维张量 → ``{"__type__": "Tensor", "buffer": 原始字节, "dtype": "torch.int32"}``；
- ``None``、bool、int、float、str、bytes 原样保留，list / tuple / dict 逐个元素递归。

反序列化反过来：见到 ``__type__`` 就去一张"类名 → 类"的表里找到类，递归还原字段后构造对象。
这张表由接收方给出（``class_table(globals())``：定义消息的那个模块里的 dataclass），
表里没有的名字一律拒绝：不然字节里写着什么名字就调用什么，等于让发送方替我们挑。

收到的帧可能是坏的（别的版本的进程、写错了的测试、被截断的数据）。解码失败一律抛出
``MessageDecodeError``，说清楚哪里不对，而不是让一个 ``KeyError: '__type__'`` 从深处冒出来。
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import torch

from minisgl.utils.mp import MessageDecodeError

__all__ = [
    "MessageDecodeError",
    "class_table",
    "deserialize_type",
    "serialize_type",
]

TENSOR_TYPE = "Tensor"  # 张量占用的类名；消息类不要取这个名字


def class_table(namespace: Mapping[str, Any]) -> dict[str, type]:
    """从一个模块的 ``globals()`` 里挑出所有 dataclass，作为反序列化时的"类名 → 类"表。

    只要 dataclass：``globals()`` 里还有 ``torch``、``dataclass`` 这些名字，帧里写一个
    ``"__type__": "dataclass"`` 不应该真的去调用它。
    """
    return {
        name: obj
        for name, obj in namespace.items()
        if isinstance(obj, type) and dataclasses.is_dataclass(obj)
    }


# ---------------------------------------------------------------- 序列化


def _serialize_any(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, (list, tuple)):
        return [_serialize_any(v) for v in value]  # msgpack 里只有数组，tuple 也变成 list
    if isinstance(value, dict):
        return {k: _serialize_any(v) for k, v in value.items()}
    return serialize_type(value)


def _serialize_tensor(t: torch.Tensor) -> dict[str, Any]:
    if t.dim() != 1:
        raise ValueError(f"only 1-D tensors can be serialized, got shape {tuple(t.shape)}")
    # 先看成一串 uint8 再取字节：numpy 没有 bfloat16，t.numpy() 对 bf16 张量会直接报错；
    # 按字节看就和 dtype 无关了，dtype 另外用字符串记下
    raw = t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
    return {"__type__": TENSOR_TYPE, "buffer": raw, "dtype": str(t.dtype)}


def serialize_type(obj: Any) -> dict[str, Any]:
    """把一个 dataclass 对象（或 1 维张量）变成只含基本类型的 dict，可以直接交给 msgpack。"""
    if isinstance(obj, torch.Tensor):
        return _serialize_tensor(obj)
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"cannot serialize {type(obj).__name__}: not a dataclass or a tensor")
    result: dict[str, Any] = {"__type__": type(obj).__name__}
    for name in _field_names(type(obj)):
        result[name] = _serialize_any(getattr(obj, name))
    return result


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """按声明顺序的字段名。每个 token 都要编码一条消息：每个类只问一次 ``dataclasses.fields``。"""
    return tuple(f.name for f in dataclasses.fields(cls))


# ---------------------------------------------------------------- 反序列化


def _deserialize_any(cls_map: Mapping[str, type], data: Any) -> Any:
    if data is None or isinstance(data, (bool, int, float, str, bytes)):  # 最常见的，先看
        return data
    if isinstance(data, dict):
        if "__type__" in data:
            return deserialize_type(cls_map, data)
        return {k: _deserialize_any(cls_map, v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_deserialize_any(cls_map, v) for v in data]
    raise MessageDecodeError(f"unexpected value of type {type(data).__name__} in a message")


def _dtype_from_name(name: Any) -> torch.dtype:
    dtype = getattr(torch, name.removeprefix("torch."), None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise MessageDecodeError(f"tensor with unknown dtype {name!r}")
    return dtype


def _deserialize_tensor(data: Mapping[str, Any]) -> torch.Tensor:
    buffer = data.get("buffer")
    if not isinstance(buffer, bytes):
        raise MessageDecodeError(f"tensor buffer must be bytes, got {type(buffer).__name__}")
    dtype = _dtype_from_name(data.get("dtype"))
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if len(buffer) % itemsize != 0:
        raise MessageDecodeError(f"{len(buffer)} bytes is not a whole number of {dtype} elements")
    if not buffer:  # torch.frombuffer 不接受空的缓冲区
        return torch.empty(0, dtype=dtype)
    # 拷进一个 bytearray：msgpack 给的 bytes 是只读的，张量要有自己的一份可写内存
    raw = torch.frombuffer(bytearray(buffer), dtype=torch.uint8)
    return raw.view(dtype)  # 按字节重新解释成原来的 dtype；bfloat16 也一样


def deserialize_type(cls_map: Mapping[str, type], data: Any) -> Any:
    """``serialize_type`` 的逆过程。``cls_map`` 列出允许出现的类（``class_table(globals())``）。"""
    if not isinstance(data, dict):
        raise MessageDecodeError(f"a message must be a dict, got {type(data).__name__}")
    if "__type__" not in data:
        raise MessageDecodeError(f"a message must have a '__type__' key, got keys {list(data)}")
    type_name = data["__type__"]
    if type_name == TENSOR_TYPE:
        return _deserialize_tensor(data)
    cls = cls_map.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        raise MessageDecodeError(
            f"unknown message type {type_name!r}; this decoder knows {sorted(cls_map)}"
        )
    _check_fields(cls, data)
    kwargs = {k: _deserialize_any(cls_map, v) for k, v in data.items() if k != "__type__"}
    return cls(**kwargs)


def _check_fields(cls: type, data: Mapping[str, Any]) -> None:
    """字段多了或少了：多半是收发两边的代码版本不一致。在构造对象之前说清楚差在哪。"""
    if not dataclasses.is_dataclass(cls):
        return
    accepted, required = _init_fields(cls)
    given = data.keys() - {"__type__"}
    unexpected = sorted(given - accepted)
    missing = sorted(required - given)
    if unexpected or missing:
        raise MessageDecodeError(
            f"fields do not match {cls.__name__}: unexpected {unexpected}, missing {missing}"
        )


@functools.cache
def _init_fields(cls: type) -> tuple[frozenset[str], frozenset[str]]:
    """(构造函数接受的字段, 其中没有默认值、必须给出的字段)；每个类只算一次。"""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = (
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    return frozenset(f.name for f in fields), frozenset(required)


# >> ch16
@dataclasses.dataclass(frozen=True)
class ReplyStatus:
    """一个请求到这一条回复为止的状态：为什么结束、出了什么错、用了多少 token——OpenAI 接口的
    ``finish_reason`` 和 ``usage``。调度器算出它，装进 ``DetokenizeMsg``，detokenizer 原样放进
    ``UserReply``：两组消息共用这一个类型，所以放在这里。"""

    finish_reason: str | None = None  # "stop"、"length"、"error"、"abort"；没结束时为 None
    error: str | None = None  # finish_reason 为 "error" 时给人看的说明
    prompt_tokens: int = 0  # 提示的 token 数
    completion_tokens: int = 0  # 到这一条为止生成的 token 数（含停止符）


__all__ += ["ReplyStatus"]
# << ch16
