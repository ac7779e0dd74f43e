"""练习 051：后端挂了——每个等待者恰好一条错误回复，之后的请求一律 503。"""

from __future__ import annotations

from typing import Any, NamedTuple


class Reply(NamedTuple):
    """后端送来的一条回复。已经写好，不要改。"""

    text: str
    finished: bool = False
    error: str | None = None  # 不为 None 时这是一条出错的结束回复


def error_body(status: int, message: str) -> dict[str, Any]:
    """OpenAI 格式的错误体。已经写好。"""
    kind = "invalid_request_error" if status < 500 else "internal_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class Frontend:
    """等待中的请求、后端的回复和故障。"""

    def __init__(self) -> None:
        self.failure: str | None = None
        raise NotImplementedError("在这里初始化你需要的状态")

    def submit(self, uid: int, stream: bool) -> tuple[int, dict[str, Any]] | None:
        """登记一个新请求；已经故障时返回 503 的响应，不登记。"""
        raise NotImplementedError

    def deliver(self, uid: int, reply: Reply) -> bool:
        """处理后端的一条回复；uid 不在等时丢掉它，返回 False。"""
        raise NotImplementedError

    def fail(self, reason: str) -> list[int]:
        """第一次：记下原因，给每个等待者一条错误回复，返回它们的 uid。之后：返回 []。"""
        raise NotImplementedError

    def health(self) -> tuple[int, dict[str, Any]]:
        raise NotImplementedError

    def waiting(self) -> list[int]:
        raise NotImplementedError

    def result(self, uid: int) -> tuple[int, Any] | None:
        """请求结束了就返回 (状态码, 响应)，否则 None；没登记过的 uid 抛 KeyError。"""
        raise NotImplementedError
