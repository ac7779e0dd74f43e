"""练习 040：停止字符串——跨 token 的匹配与保留。"""

from __future__ import annotations


class StopMatcher:
    def __init__(self, stops: list[str]) -> None:
        """stops：停止字符串（不能有空串）。"""
        raise NotImplementedError("在这里实现 __init__")

    def feed(self, text: str) -> tuple[str, bool]:
        """喂进一段增量文本，返回 (现在可以发出的文本, 是否已经停止)。"""
        raise NotImplementedError("在这里实现 feed")

    def flush(self) -> str:
        """流自然结束：发出留住的文本。"""
        raise NotImplementedError("在这里实现 flush")
