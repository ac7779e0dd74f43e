"""参考答案：名字 → 实现的通用注册表。"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """一张“名字 → 对象”的表：用 register 装饰器登记，用 get 按名字取出。"""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._table: dict[str, T] = {}  # 放在实例上：每张表各自独立

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._table:
                raise ValueError(f"{self.kind} {name!r} 重复登记")
            self._table[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        if name not in self._table:
            supported = ", ".join(self.names()) or "（无）"
            raise ValueError(f"未知的{self.kind} {name!r}，支持的有：{supported}")
        return self._table[name]

    def names(self) -> list[str]:
        return sorted(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table
