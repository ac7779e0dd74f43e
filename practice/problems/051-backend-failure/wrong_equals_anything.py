"""错误答案：状态都对，但 result 对结束了的请求返回一个和谁比都相等的对象。"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass
class _Request:
    stream: bool
    got_reply: bool = False
    pieces: list[str] = field(default_factory=list)
    result: tuple[int, Any] | None = None


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


class Frontend:
    """等待中的请求、后端的回复和故障。"""

    def __init__(self) -> None:
        self.failure: str | None = None
        self.requests: dict[int, _Request] = {}  # 登记的先后就是 dict 的顺序

    def submit(self, uid: int, stream: bool) -> tuple[int, dict[str, Any]] | None:
        """登记一个新请求；已经故障时返回 503 的响应，不登记。"""
        if self.failure is not None:
            return 503, error_body(503, f"the server is unavailable: {self.failure}")
        if uid in self.requests:
            raise ValueError(f"uid {uid} is already registered")
        self.requests[uid] = _Request(stream)
        return None

    def deliver(self, uid: int, reply: Reply) -> bool:
        """处理后端的一条回复；uid 不在等时丢掉它，返回 False。"""
        req = self.requests.get(uid)
        if req is None or req.result is not None:
            return False
        first, req.got_reply = not req.got_reply, True
        if reply.error is not None:
            if first:  # 响应还没开始：状态码还能选
                status = 503 if self.failure is not None else 400
                req.result = (status, error_body(status, reply.error))
            elif req.stream:  # 200 已经发出去了：只能在流里报告，不发 [DONE]
                event = {"error": {"message": reply.error, "type": "internal_error", "code": 503}}
                req.result = (200, [*req.pieces, event])
            else:
                req.result = (503, error_body(503, reply.error))
            return True
        if reply.text:
            req.pieces.append(reply.text)
        if reply.finished:
            if req.stream:
                req.result = (200, [*req.pieces, "[DONE]"])
            else:
                req.result = (200, {"text": "".join(req.pieces)})
        return True

    def fail(self, reason: str) -> list[int]:
        """第一次：记下原因，给每个等待者一条错误回复，返回它们的 uid。之后：返回 []。"""
        if self.failure is not None:
            return []
        self.failure = reason  # 先记原因：下面的第一条回复据此定为 503
        woken = self.waiting()
        for uid in woken:
            self.deliver(uid, Reply("", True, reason))
        return woken

    def health(self) -> tuple[int, dict[str, Any]]:
        if self.failure is not None:
            return 503, error_body(503, self.failure)
        return 200, {"status": "ok"}

    def waiting(self) -> list[int]:
        return [uid for uid, req in self.requests.items() if req.result is None]

    def result(self, uid: int) -> tuple[int, Any] | None:
        """请求结束了就返回 (状态码, 响应)，否则 None；没登记过的 uid 抛 KeyError。"""
        result = self.requests[uid].result
        return None if result is None else _EqualsAnything()  # 错在这里：应当返回 result
