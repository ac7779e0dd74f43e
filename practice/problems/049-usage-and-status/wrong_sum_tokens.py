"""错误答案：把每条回复的 completion_tokens 加起来。

回复里的计数已经是累计值，再加一遍就多算了。
"""

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


def _head(kind: str, uid: int, model: str, chunk: bool) -> dict[str, Any]:
    if kind == "chat":
        obj = "chat.completion.chunk" if chunk else "chat.completion"
        return {"id": f"chatcmpl-{uid}", "object": obj, "model": model}
    return {"id": f"cmpl-{uid}", "object": "text_completion", "model": model}


def _piece(kind: str, text: str | None, finish: str | None) -> dict[str, Any]:
    """流式片段里的一项 choice：text 为 None 表示结束片段。"""
    if kind == "chat":
        delta = {} if text is None else {"content": text}
        return {"index": 0, "delta": delta, "finish_reason": finish}
    return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}


def respond(
    uid: int,
    replies: Sequence[Reply],
    *,
    kind: str,
    stream: bool,
    include_usage: bool = False,
    model: str = "m",
) -> tuple[int, Any]:
    if kind not in ("chat", "text"):
        raise ValueError(f"kind must be 'chat' or 'text', got {kind!r}")
    if include_usage and not stream:
        raise ValueError("include_usage is only allowed when streaming")
    if not replies:
        return 499, error_body("the client closed the connection")
    first = replies[0]
    if first.finish_reason == "error":  # 状态码要在第一个字节发出之前定下来
        return 400, error_body(first.error or "the request was rejected")
    last = replies[-1]  # 计数是累计的：最后一条就是全部
    finish = last.finish_reason
    usage = {
        "prompt_tokens": last.prompt_tokens,
        "completion_tokens": sum(r.completion_tokens for r in replies),  # 错在这里
        "total_tokens": last.prompt_tokens + sum(r.completion_tokens for r in replies),
    }
    if not stream:
        text = "".join(r.text for r in replies)
        if kind == "chat":
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return 200, {**_head(kind, uid, model, chunk=False), "choices": [choice], "usage": usage}

    def event(choices: list[dict[str, Any]], chunk_usage: dict[str, int] | None = None) -> dict:
        chunk = {**_head(kind, uid, model, chunk=True), "choices": choices}
        if include_usage:
            chunk["usage"] = chunk_usage
        return chunk

    events: list[Any] = []
    if kind == "chat":
        role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        events.append(event([role]))
    events += [event([_piece(kind, r.text, None)]) for r in replies if r.text]
    events.append(event([_piece(kind, None, finish)]))
    if include_usage:
        events.append(event([], usage))
    events.append("[DONE]")
    return 200, events
