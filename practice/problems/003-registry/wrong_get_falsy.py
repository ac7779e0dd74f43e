"""错误答案：用 “if not self._table.get(name)” 判断是否存在，登记了 0、None 这类值就取不出来。"""

from __future__ import annotations


class Registry:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._table: dict = {}

    def register(self, name: str):
        def decorator(obj):
            if name in self._table:
                raise ValueError(f"{self.kind} {name!r} 重复登记")
            self._table[name] = obj
            return obj

        return decorator

    def get(self, name: str):
        obj = self._table.get(name)
        if not obj:  # 错在这里：0、None、空列表都会被当成“不存在”
            raise ValueError(f"未知的{self.kind} {name!r}，支持的有：{', '.join(self.names())}")
        return obj

    def names(self) -> list[str]:
        return sorted(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table
