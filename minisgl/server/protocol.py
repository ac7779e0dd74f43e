"""OpenAI 接口的格式：请求体的模型与校验，两种接口的响应长什么样。

- 请求：``/v1/chat/completions`` 的 ``ChatCompletionRequest``（一段对话 ``messages``，或者一段文本
  ``prompt``）、``/v1/completions`` 的 ``CompletionRequest``、``/generate`` 的 ``GenerateRequest``。
  不合法的字段在校验器里拒绝（变成 400），认识但不支持的功能（``logprobs`` 之类）也明确拒绝；
- ``/v1/chat/completions`` 的响应：非流式是 ``chat.completion``，文本在 ``message.content``；
  流式片段是 ``chat.completion.chunk``，文本在 ``delta``，第一个片段带角色；``id`` 以 ``chatcmpl-``
  开头；
- ``/v1/completions`` 的响应：流式和非流式都是 ``text_completion``，文本在 ``text``；``id`` 以
  ``cmpl-`` 开头。

两种接口、流式和非流式，都从同一个 ``Generation`` 生成；这里的函数只产出 JSON 对象，
编码成 HTTP 响应（SSE、错误体）是 ``api_server`` 的事。
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from minisgl.core import SamplingParams

from .completions import Generation

__all__ = [
    "ChatCompletionRequest",
    "GenerateRequest",
    "Kind",
    "UNLIMITED_TOKENS",
    "completion_body",
    "stream_events",
]

# >> ch16
from collections.abc import Iterable

from pydantic import ConfigDict

__all__ += [
    "MAX_STOP_STRINGS",
    "UNSUPPORTED_FIELDS",
    "CompletionRequest",
    "StreamOptions",
    "check_unsupported",
]

# << ch16
# 没给 max_tokens 时按 OpenAI 的约定"生成到上下文用完为止"：给一个很大的数，调度器会把它
# 截到"上下文长度 - 提示长度"和 KV 池容量以内
UNLIMITED_TOKENS = 1 << 30

# ~~ ch15 < ch16
# ~ Kind = Literal["chat"]  # /v1/chat/completions
# ~~
# >> ch16
Kind = Literal["chat", "text"]  # /v1/chat/completions 或 /v1/completions

MAX_STOP_STRINGS = 16
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI 补全接口的默认值

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
    # >> ch19
    # 扩展（vLLM 的同名选项）：每个片段都带到这一刻为止的 usage。API Server 忙时一个片段可能装着
    # 几个 token 的文本，客户端要确切知道读到了几个 token，就看它
    continuous_usage_stats: bool = Field(default=False, strict=True)
    # << ch19


def check_unsupported(extra: Iterable[tuple[str, Any]]) -> None:
    """请求里多出来的字段：要了我们不支持的功能就报错（在校验器里调用，变成 400）。"""
    for name, value in extra:
        if name in UNSUPPORTED_FIELDS and value not in UNSUPPORTED_FIELDS[name]:
            raise ValueError(f"'{name}' is not supported by this server")


# << ch16
# ---------------------------------------------------------------- 请求


class TextPart(BaseModel):
    """新版 OpenAI 客户端可以把 ``content`` 写成若干段：``[{"type": "text", "text": "..."}]``。"""

    type: Literal["text"] = "text"
    text: str


def _joined(content: str | list[TextPart]) -> str:
    """``content`` 的文本：写成几段的，按顺序接起来。"""
    return content if isinstance(content, str) else "".join(part.text for part in content)


class ChatMessage(BaseModel):
    # developer：OpenAI 的新模型给 system 起的新名字，新版客户端会发它
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]

    @field_validator("content")
    @classmethod
    def _encodable(cls, content: str | list[TextPart]) -> str | list[TextPart]:
        """JSON 的 ``"\\udfff"`` 是一个落单的代理项：解析得出来，却编码不成 UTF-8，到了发给
        tokenizer 的那一步才出错（500）。在这里就拒绝（400）。"""
        try:
            _joined(content).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("contains a lone surrogate, which is not valid Unicode") from None
        return content

    def to_dict(self) -> dict[str, str]:
        """交给对话模板的那一条：几段文本接起来；模板只认 system，developer 按 system 算。"""
        role = "system" if self.role == "developer" else self.role
        return {"role": role, "content": _joined(self.content)}


class ChatCompletionRequest(BaseModel):
    """``/v1/chat/completions`` 的请求体。没有列出的字段（``user`` 之类）忽略。"""

    # >> ch16
    # 多出来的字段留在 model_extra 里：_check 要看客户端是不是要了我们不支持的功能
    model_config = ConfigDict(extra="allow")
    # << ch16
    # strict：JSON 里的 true 不是数字 1，字符串 "8" 也不是 8——类型不对就是客户端写错了
    model: str = ""
    messages: list[ChatMessage] | None = None
    prompt: str | None = Field(default=None, min_length=1)
    # 上限：再大的数 msgpack 装不下（超过 64 位），发给后端之前就该拒绝
    max_tokens: int | None = Field(default=None, ge=1, le=UNLIMITED_TOKENS, strict=True)
    max_completion_tokens: int | None = Field(  # 新版客户端的名字
        default=None, ge=1, le=UNLIMITED_TOKENS, strict=True
    )
    temperature: float = Field(default=1.0, ge=0.0, le=2.0, strict=True)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, strict=True)
    top_k: int = Field(default=-1, ge=-1, le=UNLIMITED_TOKENS, strict=True)  # 扩展：-1 不限制
    n: int = Field(default=1, strict=True)
    stream: bool = Field(default=False, strict=True)
    stop: str | list[str] | None = None
    ignore_eos: bool = Field(default=False, strict=True)  # 扩展字段：生成到 eos 也不停（压测用）
    # >> ch16
    seed: int | None = Field(default=None, ge=-(1 << 63), lt=1 << 63, strict=True)  # 64 位
    stream_options: StreamOptions | None = None
    # << ch16

    @model_validator(mode="after")
    def _check(self) -> ChatCompletionRequest:
        # 在这里拒绝，错误会和字段类型错误一样变成 400，而不是在处理函数里触发断言变成 500
        if self.messages is None and self.prompt is None:
            raise ValueError("either 'messages' or 'prompt' must be provided")
        if self.messages is not None and self.prompt is not None:
            raise ValueError("provide only one of 'messages' and 'prompt'")
        if self.messages is not None and not self.messages:
            raise ValueError("'messages' must not be empty")
        if self.n != 1:
            raise ValueError("only n=1 is supported")
        # ~~ ch15 < ch16
        # ~ if self.stop:  # 宁可明确拒绝，也不要悄悄忽略：客户端会以为生成在 stop 处停下了
        # ~     raise ValueError("'stop' is not supported")
        # ~~
        # >> ch16
        if len(self.stop_strings) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings are supported")
        if any(not s for s in self.stop_strings):
            raise ValueError("stop strings must not be empty")
        if self.stream_options is not None and not self.stream:
            raise ValueError("'stream_options' is only allowed when 'stream' is true")
        check_unsupported((self.model_extra or {}).items())
        # << ch16
        return self

    # >> ch16
    @property
    def stop_strings(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    # << ch16
    @property
    def token_limit(self) -> int | None:
        """客户端给的生成上限（新名字 max_completion_tokens 优先）；None 表示生成到上下文用完。"""
        return self.max_completion_tokens or self.max_tokens

    def text(self) -> str | list[dict[str, str]]:
        """交给 tokenizer 的输入：一段对话（套对话模板），或者一段原样分词的文本。"""
        if self.messages is not None:
            return [m.to_dict() for m in self.messages]
        assert self.prompt is not None  # _check 已经保证了二者有一个
        return self.prompt

    def sampling_params(self) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            ignore_eos=self.ignore_eos,
            max_tokens=self.token_limit or UNLIMITED_TOKENS,
            # >> ch16
            seed=self.seed,
            # << ch16
        )


# >> ch16
class CompletionRequest(ChatCompletionRequest):
    """``/v1/completions`` 的请求体：和对话接口的参数相同，只是输入必须是一段文本 ``prompt``。"""

    messages: None = None  # 给了 messages 就是 400："messages: Input should be None"
    prompt: str = Field(min_length=1)

    @property
    def token_limit(self) -> int:
        """OpenAI 的约定：补全接口没给 ``max_tokens``（或者给了 null）时只生成 16 个 token。"""
        return super().token_limit or COMPLETIONS_DEFAULT_MAX_TOKENS


# << ch16
class GenerateRequest(BaseModel):
    """``/generate`` 的请求体：一段原样分词的文本。"""

    prompt: str = Field(min_length=1)
    max_tokens: int = Field(ge=1, le=UNLIMITED_TOKENS, strict=True)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, strict=True)
    ignore_eos: bool = Field(default=False, strict=True)

    def sampling_params(self) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature, ignore_eos=self.ignore_eos, max_tokens=self.max_tokens
        )


# ---------------------------------------------------------------- 响应


def _head(kind: Kind, uid: int, model: str, chunk: bool) -> dict[str, Any]:
    obj, rid = ("chat.completion.chunk" if chunk else "chat.completion"), f"chatcmpl-{uid}"
    # >> ch16
    if kind == "text":
        obj, rid = "text_completion", f"cmpl-{uid}"
    # << ch16
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model}


def _choice(kind: Kind, text: str | None, gen: Generation | None, chunk: bool) -> dict[str, Any]:
    """``choices`` 里的一项。``gen`` 不为 None 时带上结束原因。"""
    choice: dict[str, Any] = {"index": 0}
    if kind == "chat" and chunk:
        choice["delta"] = {} if text is None else {"content": text}
    elif kind == "chat":
        choice["message"] = {"role": "assistant", "content": text or ""}
    # >> ch16
    else:
        choice["text"] = text or ""
        choice["logprobs"] = None
    # << ch16
    choice["finish_reason"] = gen.finish_reason if gen is not None else None
    # >> ch16
    if gen is not None:
        choice["matched_stop"] = gen.matched_stop  # SGLang 的扩展字段：命中的停止串
    # << ch16
    return choice


async def completion_body(
    gen: Generation, kind: Kind, model: str, request: Any = None
) -> dict[str, Any]:
    """非流式：一个完整的 JSON 响应。"""
    text = await gen.text(request)
    body = _head(kind, gen.uid, model, chunk=False)
    body["choices"] = [_choice(kind, text, gen, chunk=False)]
    # >> ch16
    body["usage"] = gen.usage()
    # << ch16
    return body


async def stream_events(
    gen: Generation,
    kind: Kind,
    model: str,
    # >> ch16
    include_usage: bool = False,
    # << ch16
    # >> ch19
    continuous_usage: bool = False,
    # << ch19
) -> AsyncIterator[dict[str, Any] | str]:
    """流式：一个个 SSE 事件的内容。对话接口的第一个片段带 ``role``；每段文本一个片段；最后一个
    片段带 ``finish_reason``；最后是 ``[DONE]``。"""

    def event(choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk = _head(kind, gen.uid, model, chunk=True)
        chunk["choices"] = choices
        # >> ch16
        if include_usage:
            chunk["usage"] = None
        # << ch16
        # >> ch19
        if include_usage and continuous_usage:
            chunk["usage"] = gen.usage()
        # << ch19
        return chunk

    # ~~ ch15 < ch16
    # ~ role = kind == "chat"  # 对话接口的第一个片段带上角色
    # ~~
    # >> ch16
    if kind == "chat":  # 对话接口的第一个片段只带角色
        role = _choice(kind, None, None, chunk=True)
        role["delta"] = {"role": "assistant", "content": ""}
        yield event([role])
    # << ch16
    async for text in gen.deltas():
        choice = _choice(kind, text, None, chunk=True)
        # ~~ ch15 < ch16
        # ~ if role:
        # ~     choice["delta"]["role"], role = "assistant", False
        # ~~
        yield event([choice])
    yield event([_choice(kind, None, gen, chunk=True)])
    # >> ch16
    if include_usage:  # 再加一个 choices 为空、带 usage 的片段（其余片段的 usage 是 null）
        last = event([])
        last["usage"] = gen.usage()
        yield last
    # << ch16
    yield "[DONE]"
