"""错误答案：把 dict 写成了类属性，所有 Registry 实例共用一张表。"""

from __future__ import annotations


class Registry:
    _table: dict = {}  # 错在这里：类属性只有一份，应当在 __init__ 里给每个实例建一张表

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def register(self, name: str):
        def decorator(obj):
            if name in self._table:
                raise ValueError(f"{self.kind} {name!r} 重复登记")
            self._table[name] = obj
            return obj

        return decorator

    def get(self, name: str):
        if name not in self._table:
            raise ValueError(f"未知的{self.kind} {name!r}，支持的有：{', '.join(self.names())}")
        return self._table[name]

    def names(self) -> list[str]:
        return sorted(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table
