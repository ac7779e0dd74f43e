"""API Server 这一端的前端：把请求发给 tokenizer，把回复按 uid 分发给各自的处理协程。

一个进程、一个 asyncio 事件循环，同时服务成百上千个 HTTP 连接。所有请求的回复都从同一个 ZMQ
队列（detokenizer → API Server）进来，``FrontendManager.listen()`` 按 uid 把它们放进各自的列表，
再唤醒等着的那个请求。客户端断开时中止它的请求，后端进程挂了时让所有等待的请求都得到回复。
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from fastapi import Request

from minisgl.core import SamplingParams
from minisgl.message import (
    AbortMsg,
    BaseFrontendMsg,
    BaseTokenizerMsg,
    BatchFrontendMsg,
    TokenizeMsg,
    UserReply,
)
from minisgl.utils import ZmqAsyncPullQueue, ZmqAsyncPushQueue, init_logger

from .args import ServerArgs

__all__ = ["FrontendManager", "get_state", "init_frontend"]

DISCONNECT_CHECK_S = 0.2  # 流式输出时，最多隔多久自己问一次客户端是否断开

# >> ch16
from minisgl.message import SchedulerStats

from .metrics import Metrics

# << ch16
logger = init_logger(__name__, "api_server")

# >> ch17
import functools
import threading
from typing import Any

from minisgl.message import ReplyStatus

FAILURE_GRACE = 2.0  # 后端挂了之后，HTTP 服务再坚持几秒，把 503 送到客户端

# << ch17
# >> ch19
from dataclasses import replace

# << ch19
# ---------------------------------------------------------------- 按 uid 分发回复


def _unwrap(msg: BaseFrontendMsg) -> list[UserReply]:
    if isinstance(msg, BatchFrontendMsg):
        return [m for m in msg.data if isinstance(m, UserReply)]
    return [msg] if isinstance(msg, UserReply) else []


# >> ch19
def _merge(replies: list[UserReply]) -> UserReply:
    """同一个请求接连的几条回复合成一条：文本接起来，其余（结束与否、用量）取最后一条——
    用量是累计的，结束的回复一定在最后。"""
    text = "".join(reply.incremental_output for reply in replies)
    return replace(replies[-1], incremental_output=text)


# << ch19
@dataclass
class FrontendManager:
    """所有请求共用一个接收队列：``listen()`` 按 uid 把回复放进各自的列表，再唤醒那个请求。"""

    config: ServerArgs
    send_tokenizer: ZmqAsyncPushQueue[BaseTokenizerMsg]
    recv_tokenizer: ZmqAsyncPullQueue[BaseFrontendMsg]
    uid_counter: int = 0
    initialized: bool = False
    ack_map: dict[int, list[UserReply]] = field(default_factory=dict)
    event_map: dict[int, asyncio.Event] = field(default_factory=dict)
    listener: asyncio.Task[None] | None = None
    # 事件循环只持有任务的弱引用：没人引用的任务可能在运行到一半时被垃圾回收，所以留在这里
    background: set[asyncio.Task[None]] = field(default_factory=set)
    # >> ch16
    metrics: Metrics = field(default_factory=Metrics)
    max_seq_len: int | None = None  # 模型的上下文长度：max_tokens 超过它就是 400
    # << ch16
    # >> ch17
    failure: str | None = None  # 服务不可用的原因（后端挂了、正在关闭）；None：正常服务
    http_server: Any = None  # uvicorn.Server：出了故障时由这里让它退出
    # 还没收到任何回复的请求，和其中在这时被中止的。tokenizer 进程不止一个时，请求和它的中止
    # 消息可能分给两个进程，中止先到调度器（那时它不认识这个 uid，什么也不做）；这样的请求
    # 一有回复，就说明调度器照样在跑它，再中止一次（见 ``_recheck_abort``）
    unanswered: set[int] = field(default_factory=set)
    early_aborts: set[int] = field(default_factory=set)
    # << ch17

    def new_user(self) -> int:
        uid = self.uid_counter
        self.uid_counter += 1
        self.ack_map[uid] = []
        self.event_map[uid] = asyncio.Event()
        # >> ch17
        self.unanswered.add(uid)
        # << ch17
        return uid

    async def listen(self) -> None:
        while True:
            msg = await self.recv_tokenizer.get()
            # >> ch16
            if isinstance(msg, SchedulerStats):  # 调度器报来的账目：只留最新的一条
                self.metrics.scheduler = msg
                continue
            # << ch16
            for reply in _unwrap(msg):
                # >> ch17
                await self._recheck_abort(reply)
                # << ch17
                if reply.uid not in self.ack_map:  # 已经结束或已经中止的请求，回复直接丢掉
                    continue
                self.ack_map[reply.uid].append(reply)
                self.event_map[reply.uid].set()

    def start_listening(self) -> None:
        """第一次用到时再建 ``listen()`` 任务：这时事件循环一定在运行。"""
        if not self.initialized:
            self.listener = asyncio.create_task(self.listen())
            self.initialized = True

    async def send_one(self, msg: BaseTokenizerMsg) -> None:
        self.start_listening()
        await self.send_tokenizer.put(msg)

    async def submit(self, text: str | list[dict[str, str]], params: SamplingParams) -> int:
        """发出一个生成请求，返回它的 uid；回复从 ``wait_for_ack(uid)`` 里逐条取。"""
        uid = self.new_user()
        await self.send_one(TokenizeMsg(uid=uid, text=text, sampling_params=params))
        return uid

    async def wait_for_ack(self, uid: int) -> AsyncIterator[UserReply]:
        """逐条交出 ``uid`` 的回复，直到 ``finished``；请求被中止时提前结束。"""
        event = self.event_map[uid]
        try:
            while True:
                await event.wait()
                event.clear()
                # 整个列表换掉再处理：clear() 之后新到的回复进的是新列表，下一轮 wait() 马上返回
                pending = self.ack_map.get(uid)
                if pending is None:  # abort_user 已经拿掉了这个 uid
                    return
                self.ack_map[uid] = []
                # >> ch19
                if len(pending) > 1:  # 积压了几条（API Server 忙不过来）：合成一条，少发几个片段
                    pending = [_merge(pending)]
                # << ch19
                for ack in pending:
                    yield ack
                    if ack.finished:
                        return
        finally:
            self.ack_map.pop(uid, None)
            self.event_map.pop(uid, None)

    @contextlib.asynccontextmanager
    async def abort_on_disconnect(self, request: Request | None, uid: int) -> AsyncIterator[None]:
        """在这段代码运行期间盯着连接，客户端断开就中止 ``uid``。非流式的处理函数在等回复时，
        Starlette 不会因为连接断了而取消它，只能自己盯。"""

        async def watch(request: Request) -> None:
            while not await request.is_disconnected():
                await asyncio.sleep(0.2)
            await self.abort_user(uid)

        watcher = asyncio.create_task(watch(request)) if request is not None else None
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()

    async def stream_with_cancellation(
        self, events: AsyncIterator[bytes], request: Request, uid: int
    ) -> AsyncIterator[bytes]:
        """客户端断开连接时，通知后端中止这个请求，释放它占用的请求槽和 KV 页。

        断开通常由 Starlette 发现：它另有一个任务等着 ``http.disconnect``，一到就取消这个流，
        取消从这里的 ``async for`` 冒出来。这里每隔 ``DISCONNECT_CHECK_S`` 秒再自己问一次，兜住
        不替我们等的服务器；不逐段问：``is_disconnected()`` 每次都要建、撤一个取消域，每个 token
        问一次，是 API Server 在每个 token 上最贵的一步。
        """
        checked = time.monotonic()
        try:
            async for chunk in events:
                now = time.monotonic()
                if now - checked >= DISCONNECT_CHECK_S:
                    checked = now
                    if await request.is_disconnected():
                        raise asyncio.CancelledError
                yield chunk
        except asyncio.CancelledError:
            # 当前任务正在被取消，不能再 await：另开一个任务去发中止消息
            task = asyncio.create_task(self.abort_user(uid))
            self.background.add(task)
            task.add_done_callback(self.background.discard)
            raise

    async def abort_user(self, uid: int) -> None:
        """不再等 ``uid`` 的回复，并让后端中止它。后端找不到这个 uid（已经结束）时什么也不做，
        所以这里不必判断它是否已经结束。"""
        self.ack_map.pop(uid, None)
        event = self.event_map.pop(uid, None)
        if event is not None:
            event.set()  # 叫醒还在等的 wait_for_ack（非流式的请求在等它），让它结束
        # >> ch17
        if uid in self.unanswered:  # 调度器也许还没收到它：等它的第一条回复核对一次
            self.unanswered.discard(uid)
            self.early_aborts.add(uid)
        # << ch17
        logger.warning(f"Aborting request {uid}")
        await self.send_one(AbortMsg(uid=uid))

    async def abort_if_unfinished(self, uid: int) -> None:
        """响应结束之后的保险：请求既没有正常结束、也没有被中止（客户端在生成器开始运行之前就
        断开了，``stream_with_cancellation`` 一行都没执行），就在这里中止它。"""
        if uid in self.event_map:
            await self.abort_user(uid)

    # >> ch16
    def context_length(self) -> int:
        """一个请求（提示 + 输出）最多多少个 token，和调度器的算法相同。第一次用到时才读模型的
        config.json：启动器在拉起后端之前就建好了这个对象，那时模型文件夹可能根本不对。"""
        if self.max_seq_len is None:
            from minisgl.models.config import ModelConfig

            config = ModelConfig.from_pretrained(self.config.model_path)
            self.max_seq_len = self.config.max_seq_len or config.rotary_config.max_position
        return self.max_seq_len

    # << ch16
    # >> ch17
    async def _recheck_abort(self, reply: UserReply) -> None:
        """``reply`` 是这个请求到达 API Server 的回复：调度器已经有了这个请求。它要是在第一条回复
        之前就被中止了、而这条回复又不是结束，说明中止消息赶在请求前面到了调度器、被当成不认识的
        uid 忽略了：再发一次。这一次走不到请求前面，调度器一定认得它。每个这样的请求至多再发一次；
        调度器对每个请求都会回一条结束的回复（正常结束或中止），两个集合都不会越积越多。"""
        self.unanswered.discard(reply.uid)
        if reply.uid in self.early_aborts:
            self.early_aborts.discard(reply.uid)
            if not reply.finished:
                logger.warning(f"Aborting request {reply.uid} again: it arrived after its abort")
                await self.send_one(AbortMsg(uid=reply.uid))

    def fail(self, reason: str, *, stopping: bool = False) -> None:
        """后端进程意外退出（启动器的看门狗线程经 ``fail_from_thread`` 调用），或者服务被要求
        停下（``stopping``：收到 SIGTERM、Ctrl-C，或者后端进程被这样的信号停下）。

        之后的生成请求一律 503；正在等回复的请求各收到一条带错误的结束回复——它们都在等
        ``listen()`` 叫醒，而回复再也不会来了，不叫醒就会永远挂着。过 ``FAILURE_GRACE`` 秒
        （让这些 503 和错误事件送到客户端）再让 HTTP 服务退出，启动器接着关掉其余进程。
        两种情形只差日志的级别：被要求停下不是故障。
        """
        if self.failure is not None:
            return
        self.failure = reason
        if stopping:
            logger.info(f"{reason}; answering 503 to the requests still running")
        else:
            logger.error(f"backend failure: {reason}; answering 503 and shutting down")
        for uid, replies in self.ack_map.items():
            replies.append(UserReply(uid, "", True, ReplyStatus("error", reason)))
            self.event_map[uid].set()
        if self.http_server is not None:  # uvicorn 每 0.1 秒看一次 should_exit
            timer = threading.Timer(FAILURE_GRACE, setattr, (self.http_server, "should_exit", True))
            timer.daemon = True
            timer.start()

    def fail_from_thread(self, reason: str, *, stopping: bool = False) -> None:
        """别的线程（看门狗、定时器）调用：``fail()`` 要叫醒等待中的协程，必须在事件循环的线程里
        执行。还没有任何请求时（``listen()`` 任务还没建）也就没有要叫醒的，直接调用；事件循环已经
        关了（空闲的服务收到信号后很快就退出，叫醒的线程可能这之后才轮到运行）也就什么都不用做。"""
        if self.listener is None:
            self.fail(reason, stopping=stopping)
            return
        try:
            loop = self.listener.get_loop()
            loop.call_soon_threadsafe(functools.partial(self.fail, reason, stopping=stopping))
        except RuntimeError:  # 事件循环已经关了：HTTP 服务已经退出，没有谁还在等
            pass

    # << ch17
    def shutdown(self) -> None:
        self.send_tokenizer.stop()
        self.recv_tokenizer.stop()


_STATE: FrontendManager | None = None


def get_state() -> FrontendManager:
    if _STATE is None:
        raise RuntimeError("the frontend is not initialized; call init_frontend() first")
    return _STATE


def init_frontend(config: ServerArgs) -> FrontendManager:
    """建好 API Server 这一端的两个队列（bind 前端的接收地址），设为全局状态。

    在启动后端之前调用：detokenizer 一起来就能连上。
    """
    global _STATE
    assert config.zmq_frontend_addr is not None and config.zmq_tokenizer_addr is not None
    _STATE = FrontendManager(
        config=config,
        send_tokenizer=ZmqAsyncPushQueue(
            config.zmq_tokenizer_addr,
            create=not config.tokenizer_create_addr,
            encoder=BaseTokenizerMsg.encoder,
        ),
        recv_tokenizer=ZmqAsyncPullQueue(
            config.zmq_frontend_addr, create=True, decoder=BaseFrontendMsg.decoder
        ),
    )
    return _STATE
