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

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from minisgl.core import SamplingParams
from minisgl.message import UserReply

__all__ = ["Frontend", "Generation"]

# >> ch16
import time
from collections.abc import Sequence
from dataclasses import field
from typing import NoReturn

from .metrics import Metrics
from .stop import StopChecker

__all__ += ["RequestError"]
# << ch16
# ---------------------------------------------------------------- 一个请求的生成过程


class Frontend(Protocol):
    """``Generation`` 用到的前端：分配 uid、发消息、按 uid 等回复、中止、盯着连接、记账。"""

    # >> ch16
    metrics: Metrics
    # << ch16
    # >> ch17
    failure: str | None
    # << ch17

    async def submit(self, text: str | list[dict[str, str]], params: SamplingParams) -> int: ...
    def wait_for_ack(self, uid: int) -> AsyncIterator[UserReply]: ...
    async def abort_user(self, uid: int) -> None: ...
    async def abort_if_unfinished(self, uid: int) -> None: ...
    def abort_on_disconnect(self, request: Any, uid: int) -> AbstractAsyncContextManager[None]: ...


# >> ch16
class RequestError(Exception):
    """生成没能开始，或者中途失败：HTTP 状态码、给人看的 ``message``、出错的字段。"""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


async def _prepend(first: UserReply, rest: AsyncIterator[UserReply]) -> AsyncIterator[UserReply]:
    """先交出已经取到的第一条回复，再交出其余的。"""
    yield first
    if not first.finished:
        async for reply in rest:
            yield reply


# << ch16
@dataclass
class Generation:
    """一个请求的生成过程。``start()`` 发出请求，``deltas()`` 逐段交出文本，``text()`` 收齐全部
    文本，``release()`` 在响应结束之后收尾。"""

    frontend: Frontend
    uid: int
    replies: AsyncIterator[UserReply]
    finish_reason: str | None = None  # "stop"、"length"；客户端断开时是 "abort"
    # >> ch16
    stop: StopChecker = field(default_factory=StopChecker)
    started_at: float = field(default_factory=time.monotonic)
    matched_stop: str | None = None  # 命中的停止串
    prompt_tokens: int = 0
    completion_tokens: int = 0
    closed: bool = False
    # << ch16

    @classmethod
    async def start(
        cls,
        frontend: Frontend,
        text: str | list[dict[str, str]],
        params: SamplingParams,
        # >> ch16
        stops: Sequence[str] = (),
        request: Any = None,
        # << ch16
    ) -> Generation:
        """发出请求。"""
        # >> ch17
        if frontend.failure is not None:  # 后端已经挂了：不再发给不存在的进程
            frontend.metrics.rejected[503] += 1
            raise RequestError(503, f"the server is unavailable: {frontend.failure}")
        # << ch17
        uid = await frontend.submit(text, params)
        gen = cls(frontend, uid, frontend.wait_for_ack(uid))
        # >> ch16
        gen.stop = StopChecker(stops)
        frontend.metrics.in_flight += 1
        # 先等到第一条回复，被拒绝了（或者客户端已经走了）就抛 RequestError。等的时候客户端
        # 也可能断开（排队很久）：和非流式的 text() 一样盯着连接
        try:
            async with frontend.abort_on_disconnect(request, uid):
                first = await anext(gen.replies, None)
        except BaseException:  # 服务正在关闭、处理函数被取消：账目照样要记
            gen._close("abort")
            raise
        if first is None:  # 等待期间被中止：客户端断开了
            gen._reject(499, "the client closed the connection")
        elif first.status.finish_reason == "error":
            status = 400  # 调度器拒绝了：请求本身不合法
            # >> ch17
            if frontend.failure is not None:  # 后端挂了：是服务的问题
                status = 503
            # << ch17
            gen._reject(status, first.status.error or "the request was rejected")
        frontend.metrics.ttft.observe(time.monotonic() - gen.started_at)
        gen.replies = _prepend(first, gen.replies)  # deltas() 从第一条回复开始
        # << ch16
        # >> ch19
        # 每块都带用量时（continuous_usage_stats），对话接口只带角色的第一块也要报对提示的长度
        gen.prompt_tokens = first.status.prompt_tokens
        # << ch19
        return gen

    # >> ch16
    def _reject(self, status: int, message: str) -> NoReturn:
        """还没开始就结束了：记进 ``requests_rejected_total``（按状态码），抛给处理函数。"""
        self._close("rejected")
        self.frontend.metrics.rejected[status] += 1
        raise RequestError(status, message)

    # << ch16
    async def deltas(self) -> AsyncIterator[str]:
        """逐段交出可以发给客户端的文本，结束时设好 ``finish_reason``。"""
        async for reply in self.replies:
            text = reply.incremental_output
            # >> ch16
            # 取最大：后端挂掉时注入的错误回复不带用量（0），不能把已经数到的抹掉
            self.prompt_tokens = max(self.prompt_tokens, reply.status.prompt_tokens)
            self.completion_tokens = max(self.completion_tokens, reply.status.completion_tokens)
            text = self.stop.feed(text)
            if self.stop.matched is not None:
                self.finish_reason, self.matched_stop = "stop", self.stop.matched
                self._close("stop")
                if text:
                    yield text
                # 后面的 token 用不到了：中止后端的请求，把批次里的位置和 KV 页让出来
                await self.frontend.abort_user(self.uid)
                return
            # << ch16
            if reply.finished:
                self.finish_reason = "stop"
                # >> ch16
                if reply.status.finish_reason is not None:  # "length"、"error"……
                    self.finish_reason = reply.status.finish_reason
                text += self.stop.flush()
                # << ch16
            if text:
                yield text
        # >> ch16
        self._close(self.finish_reason or "abort")  # 没有结束就停了：请求被中止（客户端断开）
        # << ch16
        # >> ch17
        if self.finish_reason == "error":  # 生成到一半后端挂了：交完已经到的文本，再报错
            raise RequestError(503, self.frontend.failure or "the backend failed")
        # << ch17

    async def text(self, request: Any = None) -> str:
        """非流式：收齐全部文本。期间客户端断开了，照样中止这个请求。"""
        async with self.frontend.abort_on_disconnect(request, self.uid):
            return "".join([piece async for piece in self.deltas()])

    async def release(self) -> None:
        """响应结束之后一定会调用（流式响应的后台任务）：客户端在流开始之前就断开时，``deltas()``
        一次都没运行，后端还没结束的请求在这里中止。"""
        # >> ch16
        self._close(self.finish_reason or "abort")  # 这时还没记账的，就是没有正常结束的
        # << ch16
        await self.frontend.abort_if_unfinished(self.uid)

    # >> ch16
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

    # << ch16
