"""OpenAI 接口的格式：请求里认识但不支持的字段，两种接口的响应长什么样。

- ``/v1/chat/completions``：非流式是 ``chat.completion``，文本在 ``message.content``；流式片段是
  ``chat.completion.chunk``，文本在 ``delta``，第一个片段带角色；``id`` 以 ``chatcmpl-`` 开头；
- ``/v1/completions``：流式和非流式都是 ``text_completion``，文本在 ``text``；``id`` 以 ``cmpl-``
  开头。

两种接口、流式和非流式，都从同一个 ``Generation`` 生成；这里的函数只产出 JSON 对象，
编码成 HTTP 响应（SSE、错误体）是 ``api_server`` 的事。
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

from .completions import Generation

__all__ = [
    "MAX_STOP_STRINGS",
    "UNSUPPORTED_FIELDS",
    "Kind",
    "StreamOptions",
    "check_unsupported",
    "completion_body",
    "stream_events",
]

Kind = Literal["chat", "text"]  # /v1/chat/completions 或 /v1/completions

MAX_STOP_STRINGS = 16

# 认识、但不支持的字段：给了有意义的值就 400，不悄悄忽略（客户端会以为它生效了）。
# 值是"等于没给"的那些取值
UNSUPPORTED_FIELDS: dict[str, tuple[Any, ...]] = {
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "best_of": (None, 1),
    "suffix": (None, ""),
    "logit_bias": (None, {}),
    "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0),
    "tools": (None, []),
    "functions": (None, []),
    "response_format": (None, {"type": "text"}),
}


class StreamOptions(BaseModel):
    include_usage: bool = Field(default=False, strict=True)  # 最后多发一个带 usage 的片段


def check_unsupported(extra: Iterable[tuple[str, Any]]) -> None:
    """请求里多出来的字段：要了我们不支持的功能就报错（在校验器里调用，变成 400）。"""
    for name, value in extra:
        if name in UNSUPPORTED_FIELDS and value not in UNSUPPORTED_FIELDS[name]:
            raise ValueError(f"'{name}' is not supported by this server")


# ---------------------------------------------------------------- 响应


def _head(kind: Kind, uid: int, model: str, chunk: bool) -> dict[str, Any]:
    if kind == "chat":
        obj, rid = ("chat.completion.chunk" if chunk else "chat.completion"), f"chatcmpl-{uid}"
    else:
        obj, rid = "text_completion", f"cmpl-{uid}"
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model}


def _choice(kind: Kind, text: str | None, gen: Generation | None, chunk: bool) -> dict[str, Any]:
    """``choices`` 里的一项。``gen`` 不为 None 时带上结束原因和命中的停止串。"""
    choice: dict[str, Any] = {"index": 0}
    if kind == "chat" and chunk:
        choice["delta"] = {} if text is None else {"content": text}
    elif kind == "chat":
        choice["message"] = {"role": "assistant", "content": text or ""}
    else:
        choice["text"] = text or ""
        choice["logprobs"] = None
    choice["finish_reason"] = gen.finish_reason if gen is not None else None
    if gen is not None:
        choice["matched_stop"] = gen.matched_stop  # SGLang 的扩展字段：命中的停止串
    return choice


async def completion_body(
    gen: Generation, kind: Kind, model: str, request: Any = None
) -> dict[str, Any]:
    """非流式：一个完整的 JSON 响应。"""
    text = await gen.text(request)
    body = _head(kind, gen.uid, model, chunk=False)
    body["choices"] = [_choice(kind, text, gen, chunk=False)]
    body["usage"] = gen.usage()
    return body


async def stream_events(
    gen: Generation, kind: Kind, model: str, include_usage: bool
) -> AsyncIterator[dict[str, Any] | str]:
    """流式：一个个 SSE 事件的内容。对话接口的第一个片段带 ``role``；每段文本一个片段；最后一个
    片段带 ``finish_reason``；``include_usage`` 时再加一个 ``choices`` 为空、带 ``usage`` 的片段
    （这时其余片段的 ``usage`` 是 null，和 OpenAI 一致）；最后是 ``[DONE]``。"""

    def event(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
        chunk = _head(kind, gen.uid, model, chunk=True)
        chunk["choices"] = choices
        if include_usage:
            chunk["usage"] = usage
        return chunk

    if kind == "chat":
        role = _choice(kind, None, None, chunk=True)
        role["delta"] = {"role": "assistant", "content": ""}
        yield event([role])
    async for text in gen.deltas():
        yield event([_choice(kind, text, None, chunk=True)])
    yield event([_choice(kind, None, gen, chunk=True)])
    if include_usage:
        yield event([], gen.usage())
    yield "[DONE]"
