"""按名字登记实现：注意力后端、MoE 后端、KV 缓存管理器……都用它。

命令行上写 ``--attention-backend torch``，代码里要从字符串找到实现。一个字典就够了，
包一层类是为了两件事：重名登记立刻报错（两个文件都叫 "torch" 时，后导入的不能悄悄覆盖前一个）；
找不到时的错误信息列出所有支持的名字（用户写错了，一眼就知道该写什么）。
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """名字 -> 实现 的登记表。``kind`` 只用于错误信息，例如 "attention backend"。"""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """装饰器：``@REG.register("torch")`` 把被装饰的类或函数登记在 ``name`` 下，原样返回它。"""
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")

        def decorator(item: T) -> T:
            if name in self._items:  # register() 和真正登记之间可能又有同名登记
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = item
            return item  # 返回原对象：被装饰的类或函数在原来的模块里照样能用

        return decorator

    def get(self, name: str) -> T:
        if name not in self._items:
            supported = ", ".join(self.names()) or "(none)"
            raise ValueError(f"unknown {self.kind} {name!r}; supported: {supported}")
        return self._items[name]

    def names(self) -> list[str]:
        """所有已登记的名字，排好序（错误信息和 --help 里的顺序稳定，不随导入顺序变）。"""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()})"
