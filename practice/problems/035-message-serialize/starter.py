"""练习 035：进程间消息的序列化——dataclass ↔ 基本类型组成的 dict，数组存原始字节。"""

from __future__ import annotations

from array import array, typecodes  # noqa: F401  （实现时会用到）
from dataclasses import MISSING, fields, is_dataclass  # noqa: F401


class DecodeError(ValueError):
    """收到的数据不是一条合法的消息。"""


def serialize(obj: object) -> object:
    """dataclass 对象 → {"__type__": 类名, 字段...}；array → 原始字节；其他不认识的 → TypeError。"""
    raise NotImplementedError("在这里实现 serialize")


def deserialize(registry: dict[str, type], data: object) -> object:
    """serialize 的逆过程：按 registry 里的类构造对象；数据不对时抛 DecodeError。"""
    raise NotImplementedError("在这里实现 deserialize")
