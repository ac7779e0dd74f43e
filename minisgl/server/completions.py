"""一个生成请求从发出到结束：OpenAI 接口要的 ``finish_reason``、``usage``、``stop`` 和错误码。

第 15 章的处理函数发出请求后就只管把增量文本转给客户端。这一章补齐它省掉的东西：

- **先等第一条回复，再决定状态码**：调度器拒绝的请求（提示比上下文还长……）只有一条带
  ``error`` 的结束回复。流式响应一旦开始，200 和响应头就已经发出去了，没法再改成 400；所以
  先等到第一条回复：是错误就回 400，否则才开始流式输出。第一条回复就是第一个 token，
  这段等待本来就要等（TTFT），不增加延迟；
- **停止串**：回复的文本先过 ``StopChecker``，命中时截断，并中止后端的这个请求（省下后面的算力）；
- **结束原因和用量**：每条回复都带着提示和已生成的 token 数，最后一条带着结束原因；
- **两种接口、两种形状**：``/v1/chat/completions``（``message``/``delta``）和
  ``/v1/completions``（``text``），流式和非流式，都从同一个 ``Generation`` 生成。
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from minisgl.core import SamplingParams
from minisgl.message import TokenizeMsg, UserReply

from .stop import StopChecker

if TYPE_CHECKING:
    from fastapi import Request

    from .api_server import FrontendManager

__all__ = ["Generation", "RequestError", "abort_on_disconnect", "completion_body", "stream_events"]

Kind = Literal["chat", "text"]  # /v1/chat/completions 或 /v1/completions


class RequestError(Exception):
    """生成还没开始就失败了，变成一个 HTTP 错误：``status``、给人看的 ``message``、出错的字段。"""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


@contextlib.asynccontextmanager
async def abort_on_disconnect(
    state: FrontendManager, request: Request | None, uid: int
) -> AsyncIterator[None]:
    """在这段代码运行期间盯着连接（第 15 章的 ``_abort_on_disconnect``）：客户端断开就中止 ``uid``。
    Starlette 不会因为连接断了而取消非流式的处理函数，只能自己盯。"""
    watcher = None
    if request is not None:
        watcher = asyncio.create_task(state._abort_on_disconnect(request, uid))
    try:
        yield
    finally:
        if watcher is not None:
            watcher.cancel()


@dataclass
class Generation:
    """一个请求的生成过程。``start()`` 发出请求并等到第一条回复；``deltas()`` 逐段交出文本。"""

    state: FrontendManager
    uid: int
    stop: StopChecker
    replies: AsyncIterator[UserReply]
    first: UserReply | None = None  # start() 等到的第一条回复，deltas() 从它开始
    started_at: float = field(default_factory=time.monotonic)
    finish_reason: str | None = None  # "stop"、"length"；客户端断开时是 "abort"
    matched_stop: str | None = None  # 命中的停止串
    prompt_tokens: int = 0
    completion_tokens: int = 0
    closed: bool = False

    @classmethod
    async def start(
        cls,
        state: FrontendManager,
        text: str | list[dict[str, str]],
        params: SamplingParams,
        stops: Sequence[str],
        request: Request | None = None,
    ) -> Generation:
        """发出请求，等到第一条回复。调度器拒绝了它（或者客户端已经走了）就抛 ``RequestError``。"""
        uid = state.new_user()
        gen = cls(state, uid, StopChecker(stops), state.wait_for_ack(uid))
        state.metrics.in_flight += 1
        await state.send_one(TokenizeMsg(uid=uid, text=text, sampling_params=params))
        # 等第一条回复的时候客户端也可能断开（排队很久）：和第 15 章的非流式一样盯着连接
        try:
            async with abort_on_disconnect(state, request, uid):
                gen.first = await anext(gen.replies, None)
        except BaseException:  # 服务正在关闭、处理函数被取消：账目照样要记
            gen._close("abort")
            raise
        if gen.first is None:  # 等待期间被中止：客户端断开了
            gen._close("abort")
            raise RequestError(499, "the client closed the connection")
        if gen.first.finish_reason == "error":
            gen._close("rejected")
            # ~~ ch16 < ch17
            # ~ raise RequestError(400, gen.first.error or "the request was rejected")
            # ~~
            # >> ch17
            # 后端挂了（第 17 章）是服务的问题：503；否则是请求本身不合法：400
            status = 503 if state.failure is not None else 400
            raise RequestError(status, gen.first.error or "the request was rejected")
            # << ch17
        state.metrics.ttft.observe(time.monotonic() - gen.started_at)
        return gen

    async def deltas(self) -> AsyncIterator[str]:
        """逐段交出可以发给客户端的文本（不含停止串），结束时设好 ``finish_reason`` 和用量。"""
        try:
            async for reply in self._all_replies():
                # 取最大：后端挂掉时注入的错误回复不带用量（0），不能把已经数到的抹掉
                self.prompt_tokens = max(self.prompt_tokens, reply.prompt_tokens)
                self.completion_tokens = max(self.completion_tokens, reply.completion_tokens)
                text = self.stop.feed(reply.incremental_output)
                if self.stop.matched is not None:
                    self.finish_reason, self.matched_stop = "stop", self.stop.matched
                    if text:
                        yield text
                    # 后面的 token 用不到了：中止后端的请求，把批次里的位置和 KV 页让出来
                    await self.state.abort_user(self.uid)
                    return
                if reply.finished:
                    text += self.stop.flush()
                    self.finish_reason = reply.finish_reason or "stop"
                if text:
                    yield text
        finally:
            self._close(self.finish_reason or "abort")  # 没有正常结束：客户端断开或被取消

    async def _all_replies(self) -> AsyncIterator[UserReply]:
        if self.first is not None:
            first, self.first = self.first, None
            yield first
            if first.finished:
                return
        async for reply in self.replies:
            yield reply

    async def text(self) -> str:
        """非流式：收齐全部文本。"""
        return "".join([piece async for piece in self.deltas()])

    async def release(self) -> None:
        """响应结束之后一定会调用（流式响应的后台任务）：客户端在流开始之前就断开时，``deltas()``
        一次都没运行，账要在这里记；后端还没结束的请求在这里中止。"""
        self._close(self.finish_reason or "abort")
        await self.state.abort_if_unfinished(self.uid)

    def _close(self, reason: str) -> None:
        """记一次账（恰好一次）：结束原因、用量、用时。被拒绝的（"rejected"）由调用方按状态码记。"""
        if self.closed:
            return
        self.closed = True
        metrics = self.state.metrics
        metrics.in_flight -= 1
        if reason == "rejected":
            return
        elapsed = time.monotonic() - self.started_at
        metrics.record_finish(reason, self.prompt_tokens, self.completion_tokens, elapsed)

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


# ---------------------------------------------------------------- 两种接口的响应体


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


async def completion_body(gen: Generation, kind: Kind, model: str) -> dict[str, Any]:
    """非流式：一个完整的 JSON 响应。"""
    text = await gen.text()
    body = _head(kind, gen.uid, model, chunk=False)
    body["choices"] = [_choice(kind, text, gen, chunk=False)]
    body["usage"] = gen.usage()
    return body


def _sse(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


async def stream_events(
    gen: Generation, kind: Kind, model: str, include_usage: bool
) -> AsyncIterator[bytes]:
    """流式：SSE 事件。对话接口的第一个片段带 ``role``；每段文本一个片段；最后一个片段带
    ``finish_reason``；``include_usage`` 时再加一个 ``choices`` 为空、带 ``usage`` 的片段
    （这时其余片段的 ``usage`` 是 null，和 OpenAI 一致）；最后是 ``[DONE]``。"""

    def event(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
        chunk = _head(kind, gen.uid, model, chunk=True)
        chunk["choices"] = choices
        if include_usage:
            chunk["usage"] = usage
        return _sse(chunk)

    if kind == "chat":
        role = _choice(kind, None, None, chunk=True)
        role["delta"] = {"role": "assistant", "content": ""}
        yield event([role])
    async for text in gen.deltas():
        yield event([_choice(kind, text, None, chunk=True)])
    # >> ch17
    if gen.finish_reason == "error":  # 生成到一半后端挂了（第 17 章）：OpenAI 格式的错误事件
        message = gen.state.failure or "the backend failed"
        yield _sse({"error": {"message": message, "type": "internal_error", "code": 503}})
        return
    # << ch17
    yield event([_choice(kind, None, gen, chunk=True)])
    if include_usage:
        yield event([], gen.usage())
    yield _sse("[DONE]")
