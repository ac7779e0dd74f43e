"""练习 049：一个请求的响应——状态码、finish_reason、usage 与 include_usage。"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple


class Reply(NamedTuple):
    """沿消息链送回的一条回复。已经写好，不要改。"""

    text: str
    finished: bool
    finish_reason: str | None = None  # "stop"、"length"、"error"；没结束时为 None
    error: str | None = None  # finish_reason 为 "error" 时给人看的说明
    prompt_tokens: int = 0
    completion_tokens: int = 0  # 到这一条为止生成的 token 数（含停止符）


def error_body(message: str) -> dict[str, Any]:
    """OpenAI 格式的错误体。已经写好。"""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def respond(
    uid: int,
    replies: Sequence[Reply],
    *,
    kind: str,
    stream: bool,
    include_usage: bool = False,
    model: str = "m",
) -> tuple[int, Any]:
    """返回 (状态码, 响应)：错误体、非流式的 JSON，或者流式的事件列表（最后是 "[DONE]"）。"""
    raise NotImplementedError("在这里实现 respond")
