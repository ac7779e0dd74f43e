"""练习 038：增量反分词——一个字符凑齐了才发。"""

from __future__ import annotations


class Detokenizer:
    def __init__(self, token_bytes: dict[int, bytes], stop_ids: set[int]) -> None:
        """token_bytes：token → 字节（特殊 token 是 b""）；stop_ids：停止符。"""
        raise NotImplementedError("在这里实现 __init__")

    def step(self, msgs: list[tuple[int, int, bool]]) -> list[str]:
        """msgs：[(uid, token, finished), ...]，token == -1 表示没有 token。每一项返回一段增量。"""
        raise NotImplementedError("在这里实现 step")

    def abort(self, uid: int) -> None:
        """忘掉这个请求；不存在时什么也不做。"""
        raise NotImplementedError("在这里实现 abort")

    def active(self) -> int:
        """还记着的请求个数。"""
        raise NotImplementedError("在这里实现 active")
