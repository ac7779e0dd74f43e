"""一个生成请求从发出到结束：``Generation``。三个生成接口都用它，各自只决定响应的形状。

- **先等第一条回复，再决定状态码**：调度器拒绝的请求（提示比上下文还长……）只有一条带
  ``error`` 的结束回复。流式响应一旦开始，200 和响应头就已经发出去了，没法再改成 400；所以
  先等到第一条回复：是错误就抛 ``RequestError``，否则才开始响应。第一条回复就是第一个 token，
  这段等待本来就要等（TTFT），不增加延迟；
- **停止串**：回复的文本先过 ``StopChecker``，命中时截断，并中止后端的这个请求（省下后面的算力）；
- **结束原因和用量**：每条回复都带着提示和已生成的 token 数，最后一条带着结束原因；
- **账目**：``/metrics`` 的在途请求数、TTFT、结束原因和用量，每个请求恰好记一次。

这个模块不认识 HTTP 框架，也不导入 ``api_server``：它要的前端只是 ``Frontend`` 里列出的几样
（``FrontendManager`` 正好都有）。
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from minisgl.core import SamplingParams
from minisgl.message import UserReply

from .metrics import Metrics
from .stop import StopChecker

__all__ = ["Frontend", "Generation", "RequestError"]


class Frontend(Protocol):
    """``Generation`` 用到的前端：分配 uid、发消息、按 uid 等回复、中止、盯着连接、记账。"""

    metrics: Metrics
    # >> ch17
    failure: str | None
    # << ch17

    async def submit(self, text: str | list[dict[str, str]], params: SamplingParams) -> int: ...
    def wait_for_ack(self, uid: int) -> AsyncIterator[UserReply]: ...
    async def abort_user(self, uid: int) -> None: ...
    async def abort_if_unfinished(self, uid: int) -> None: ...
    def abort_on_disconnect(self, request: Any, uid: int) -> AbstractAsyncContextManager[None]: ...


class RequestError(Exception):
    """生成没能开始，或者中途失败：HTTP 状态码、给人看的 ``message``、出错的字段。"""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


@dataclass
class Generation:
    """一个请求的生成过程。``start()`` 发出请求并等到第一条回复；``deltas()`` 逐段交出文本。"""

    frontend: Frontend
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
        frontend: Frontend,
        text: str | list[dict[str, str]],
        params: SamplingParams,
        stops: Sequence[str] = (),
        request: Any = None,
    ) -> Generation:
        """发出请求，等到第一条回复。被拒绝了（或者客户端已经走了）就抛 ``RequestError``。"""
        # >> ch17
        if frontend.failure is not None:  # 后端已经挂了：不再发给不存在的进程
            frontend.metrics.rejected[503] += 1
            raise RequestError(503, f"the server is unavailable: {frontend.failure}")
        # << ch17
        uid = await frontend.submit(text, params)
        gen = cls(frontend, uid, StopChecker(stops), frontend.wait_for_ack(uid))
        frontend.metrics.in_flight += 1
        # 等第一条回复的时候客户端也可能断开（排队很久）：和第 15 章的非流式一样盯着连接
        try:
            async with frontend.abort_on_disconnect(request, uid):
                gen.first = await anext(gen.replies, None)
        except BaseException:  # 服务正在关闭、处理函数被取消：账目照样要记
            gen._close("abort")
            raise
        if gen.first is None:  # 等待期间被中止：客户端断开了
            gen._reject(499, "the client closed the connection")
        elif gen.first.status.finish_reason == "error":
            # ~~ ch16 < ch17
            # ~ gen._reject(400, gen.first.status.error or "the request was rejected")
            # ~~
            # >> ch17
            # 后端挂了是服务的问题：503；否则是请求本身不合法：400
            status = 503 if frontend.failure is not None else 400
            gen._reject(status, gen.first.status.error or "the request was rejected")
            # << ch17
        frontend.metrics.ttft.observe(time.monotonic() - gen.started_at)
        return gen

    def _reject(self, status: int, message: str) -> None:
        """还没开始就结束了：记进 ``requests_rejected_total``（按状态码），抛给处理函数。"""
        self._close("rejected")
        self.frontend.metrics.rejected[status] += 1
        raise RequestError(status, message)

    async def deltas(self) -> AsyncIterator[str]:
        """逐段交出可以发给客户端的文本（不含停止串），结束时设好 ``finish_reason`` 和用量。"""
        try:
            async for reply in self._all_replies():
                # 取最大：后端挂掉时注入的错误回复不带用量（0），不能把已经数到的抹掉
                self.prompt_tokens = max(self.prompt_tokens, reply.status.prompt_tokens)
                self.completion_tokens = max(self.completion_tokens, reply.status.completion_tokens)
                text = self.stop.feed(reply.incremental_output)
                if self.stop.matched is not None:
                    self.finish_reason, self.matched_stop = "stop", self.stop.matched
                    if text:
                        yield text
                    # 后面的 token 用不到了：中止后端的请求，把批次里的位置和 KV 页让出来
                    await self.frontend.abort_user(self.uid)
                    return
                if reply.finished:
                    text += self.stop.flush()
                    self.finish_reason = reply.status.finish_reason or "stop"
                if text:
                    yield text
        finally:
            self._close(self.finish_reason or "abort")  # 没有正常结束：客户端断开或被取消
        # >> ch17
        if self.finish_reason == "error":  # 生成到一半后端挂了：交完已经到的文本，再报错
            raise RequestError(503, self.frontend.failure or "the backend failed")
        # << ch17

    async def _all_replies(self) -> AsyncIterator[UserReply]:
        if self.first is not None:
            first, self.first = self.first, None
            yield first
            if first.finished:
                return
        async for reply in self.replies:
            yield reply

    async def text(self, request: Any = None) -> str:
        """非流式：收齐全部文本。期间客户端断开了，照样中止这个请求。"""
        async with self.frontend.abort_on_disconnect(request, self.uid):
            return "".join([piece async for piece in self.deltas()])

    async def release(self) -> None:
        """响应结束之后一定会调用（流式响应的后台任务）：客户端在流开始之前就断开时，``deltas()``
        一次都没运行，账要在这里记；后端还没结束的请求在这里中止。"""
        self._close(self.finish_reason or "abort")
        await self.frontend.abort_if_unfinished(self.uid)

    def _close(self, reason: str) -> None:
        """记一次账（恰好一次）：结束原因、用量、用时。被拒绝的（"rejected"）由 ``_reject`` 记。"""
        if self.closed:
            return
        self.closed = True
        metrics = self.frontend.metrics
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
