"""错误答案：错误信息里按登记顺序列出名字，没有排序。"""

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
        if name not in self._table:
            supported = ", ".join(self._table)  # 错在这里：dict 保持的是登记顺序
            raise ValueError(f"未知的{self.kind} {name!r}，支持的有：{supported}")
        return self._table[name]

    def names(self) -> list[str]:
        return list(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table
