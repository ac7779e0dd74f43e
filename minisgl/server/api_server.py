"""API Server：FastAPI 应用，接收 OpenAI 格式的请求，经 tokenizer 交给调度器，把回复写回客户端。

一个进程、一个 asyncio 事件循环，同时服务成百上千个 HTTP 连接。所有请求的回复都从同一个 ZMQ
队列（detokenizer → API Server）进来，``FrontendManager`` 按 uid 把它们分发给各自的处理协程。

- ``POST /v1/chat/completions``、``POST /v1/completions``：OpenAI 的两个生成接口，
  ``stream=true`` 时返回 SSE，否则返回一个 JSON；
- ``POST /generate``：最简单的流式接口，``prompt`` + ``max_tokens``，每段增量文本一条 SSE；
- ``GET /v1/models``、``GET /health``、``GET /metrics``。

这个文件只管 HTTP：请求体、按 uid 分发、路由、SSE 与错误体的编码。一个请求的生成过程在
``completions.py``，响应的 JSON 形状在 ``protocol.py``，请求体大小的限制在 ``middleware.py``。
不合法的请求一律得到 400 和 OpenAI 格式的 ``{"error": {...}}``，不会变成 500。
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, model_validator
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException

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

__all__ = [
    "ChatCompletionRequest",
    "FrontendManager",
    "GenerateRequest",
    "app",
    "get_state",
    "init_frontend",
    "run_http",
]

logger = init_logger(__name__, "api_server")

# >> ch16
from fastapi.responses import PlainTextResponse
from pydantic import ConfigDict

from minisgl.message import SchedulerStats

from .completions import Generation, RequestError
from .metrics import Metrics
from .middleware import RequestSizeLimit
from .protocol import (
    MAX_STOP_STRINGS,
    Kind,
    StreamOptions,
    check_unsupported,
    completion_body,
    stream_events,
)

__all__ += ["CompletionRequest"]

# << ch16
# 没给 max_tokens 时按 OpenAI 的约定"生成到上下文用完为止"：给一个很大的数，调度器会把它
# 截到"上下文长度 - 提示长度"和 KV 池容量以内
UNLIMITED_TOKENS = 1 << 30

# >> ch17
import threading

from minisgl.message import ReplyStatus

# << ch17
# ---------------------------------------------------------------- 请求的格式


class TextPart(BaseModel):
    """新版 OpenAI 客户端可以把 ``content`` 写成若干段：``[{"type": "text", "text": "..."}]``。"""

    type: Literal["text"] = "text"
    text: str


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str | list[TextPart]

    def to_dict(self) -> dict[str, str]:
        text = self.content
        if isinstance(text, list):
            text = "".join(part.text for part in text)
        return {"role": self.role, "content": text}


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


COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI 补全接口的默认值


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


# ---------------------------------------------------------------- 按 uid 分发回复


def _unwrap(msg: BaseFrontendMsg) -> list[UserReply]:
    if isinstance(msg, BatchFrontendMsg):
        return [m for m in msg.data if isinstance(m, UserReply)]
    return [msg] if isinstance(msg, UserReply) else []


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
    failure: str | None = None  # 后端进程意外退出的说明；不为 None 时服务不可用
    http_server: Any = None  # uvicorn.Server：出了故障时由这里让它退出
    # << ch17

    def new_user(self) -> int:
        uid = self.uid_counter
        self.uid_counter += 1
        self.ack_map[uid] = []
        self.event_map[uid] = asyncio.Event()
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
        """客户端断开连接时，通知后端中止这个请求，释放它占用的请求槽和 KV 页。"""
        try:
            async for chunk in events:
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
    def fail(self, reason: str) -> None:
        """后端进程意外退出（启动器的看门狗线程经 ``fail_from_thread`` 调用）。

        之后的生成请求一律 503；正在等回复的请求各收到一条带错误的结束回复——它们都在等
        ``listen()`` 叫醒，而回复再也不会来了，不叫醒就会永远挂着。过 ``FAILURE_GRACE`` 秒
        （让这些 503 和错误事件送到客户端）再让 HTTP 服务退出，启动器接着关掉其余进程。
        """
        if self.failure is not None:
            return
        self.failure = reason
        logger.error(f"backend failure: {reason}; answering 503 and shutting down")
        for uid, replies in self.ack_map.items():
            replies.append(UserReply(uid, "", True, ReplyStatus("error", reason)))
            self.event_map[uid].set()
        if self.http_server is not None:  # uvicorn 每 0.1 秒看一次 should_exit
            timer = threading.Timer(FAILURE_GRACE, setattr, (self.http_server, "should_exit", True))
            timer.daemon = True
            timer.start()

    def fail_from_thread(self, reason: str) -> None:
        """看门狗线程调用：``fail()`` 要叫醒等待中的协程，必须在事件循环的线程里执行。
        还没有任何请求时（``listen()`` 任务还没建）也就没有要叫醒的，直接调用。"""
        if self.listener is not None:
            self.listener.get_loop().call_soon_threadsafe(self.fail, reason)
        else:
            self.fail(reason)

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


# ---------------------------------------------------------------- HTTP 的编码：SSE 与错误体

app = FastAPI(title="mini-sglang", version="0.1.0")


def sse(payload: dict[str, Any] | str) -> bytes:
    """一条 SSE 事件：``data: <内容>`` 后面跟一个空行。内容是 JSON，或者 ``[DONE]``。"""
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI 格式的错误：客户端库按 ``error.message`` 报错，而不是吐出一整页 HTML 或 traceback。
    JSON 响应和流里的错误事件用的都是它。"""
    kind = "invalid_request_error" if status < 500 else "internal_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def openai_error(status: int, message: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(status, message, param))


def event_stream(
    events: AsyncIterator[dict[str, Any] | str],
    request: Request,
    uid: int,
    release: Callable[..., Awaitable[None]],
    *args: Any,
) -> StreamingResponse:
    """把一串事件编码成 SSE 流式返回。客户端断开就中止 ``uid``（``stream_with_cancellation``）；
    响应结束之后无论如何都运行 ``release(*args)``：客户端在流开始之前就断开时，只有它能收尾。"""

    async def encode() -> AsyncIterator[bytes]:
        # ~~ ch15 < ch17
        # ~ async for event in events:
        # ~     yield sse(event)
        # ~~
        # >> ch17
        try:
            async for event in events:
                yield sse(event)
        except RequestError as e:  # 生成到一半后端挂了：一条错误事件，没有 [DONE]
            yield sse(error_body(e.status, e.message, e.param))
        # << ch17

    return StreamingResponse(
        get_state().stream_with_cancellation(encode(), request, uid),
        media_type="text/event-stream",
        background=BackgroundTask(release, *args),
    )


@app.exception_handler(RequestValidationError)
async def _on_invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    """JSON 写错、缺字段、类型不对、参数越界：FastAPI 默认回 422 和它自己的格式，改成 400。"""
    problems: list[str] = []
    param: str | None = None
    for err in exc.errors():
        if err.get("type") == "json_invalid":  # loc 里是出错的字节位置，不是字段名
            detail = err.get("ctx", {}).get("error", "")
            problems.append(f"the request body is not valid JSON: {detail}".rstrip(": "))
            continue
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        param = param or where or None
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        problems.append(f"{where}: {msg}" if where else msg)
    return openai_error(400, "; ".join(problems) or "invalid request", param)


@app.exception_handler(HTTPException)
async def _on_http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return openai_error(exc.status_code, str(exc.detail))


@app.exception_handler(Exception)
async def _on_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    logger.exception(f"unexpected error while handling {request.url.path}")
    return openai_error(500, f"internal error: {type(exc).__name__}")


# ---------------------------------------------------------------- 路由


# ~~ ch15 < ch16
# ~ def chat_chunk(uid: int, model: str, delta: dict[str, str], finish: str | None) -> dict:
# ~     """对话接口的一个流式片段：增量文本在 ``choices[0].delta`` 里。"""
# ~     choice = {"index": 0, "delta": delta, "finish_reason": finish}
# ~     head = {"id": f"chatcmpl-{uid}", "object": "chat.completion.chunk", "model": model}
# ~     return {**head, "created": int(time.time()), "choices": [choice]}
# ~
# ~
# ~ async def chat_events(
# ~     state: FrontendManager, uid: int, model: str
# ~ ) -> AsyncIterator[dict[str, Any] | str]:
# ~     """每段文本一个片段（第一个片段带角色），最后一个带 ``finish_reason``，然后 ``[DONE]``。"""
# ~     first = True
# ~     async for ack in state.wait_for_ack(uid):
# ~         delta: dict[str, str] = {"role": "assistant"} if first else {}
# ~         first = False
# ~         if ack.incremental_output:
# ~             delta["content"] = ack.incremental_output
# ~         if delta:
# ~             yield chat_chunk(uid, model, delta, None)
# ~     yield chat_chunk(uid, model, {}, "stop")
# ~     yield "[DONE]"
# ~
# ~
# ~~
async def generate_events(pieces: AsyncIterator[str]) -> AsyncIterator[str]:
    """``/generate`` 的事件：每段增量文本编码成一个 JSON 字符串（文本里的换行不会把一条事件拆成
    两行），最后 ``[DONE]``。"""
    async for text in pieces:
        yield json.dumps(text, ensure_ascii=False)
    yield "[DONE]"


@app.post("/v1/chat/completions", response_model=None)
async def v1_chat_completions(req: ChatCompletionRequest, request: Request) -> Response:
    # ~~ ch15 < ch16
    # ~ state = get_state()
    # ~ uid = await state.submit(req.text(), req.sampling_params())
    # ~ model = req.model or str(state.config.model_path)
    # ~ if req.stream:
    # ~     events = chat_events(state, uid, model)
    # ~     return event_stream(events, request, uid, state.abort_if_unfinished, uid)
    # ~ async with state.abort_on_disconnect(request, uid):
    # ~     content = "".join([ack.incremental_output async for ack in state.wait_for_ack(uid)])
    # ~ message = {"role": "assistant", "content": content}
    # ~ choice = {"index": 0, "message": message, "finish_reason": "stop"}
    # ~ head = {"id": f"chatcmpl-{uid}", "object": "chat.completion", "model": model}
    # ~ return JSONResponse({**head, "created": int(time.time()), "choices": [choice]})
    # ~
    # ~
    # ~~
    # >> ch16
    return await serve_completion(req, request, "chat")


@app.post("/v1/completions", response_model=None)
async def v1_completions(req: CompletionRequest, request: Request) -> Response:
    return await serve_completion(req, request, "text")


async def serve_completion(req: ChatCompletionRequest, request: Request, kind: Kind) -> Response:
    """两个生成接口共用：校验 → 发出请求、等第一条回复 → 流式或非流式地返回。"""
    state = get_state()
    limit = state.context_length()
    if req.token_limit is not None and req.token_limit > limit:
        name = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
        message = f"{name}={req.token_limit} exceeds the model's context length of {limit} tokens"
        return openai_error(400, message, name)
    model = req.model or str(state.config.model_path)
    try:
        params = req.sampling_params()
        gen = await Generation.start(state, req.text(), params, req.stop_strings, request)
        if req.stream:
            include_usage = req.stream_options is not None and req.stream_options.include_usage
            events = stream_events(gen, kind, model, include_usage)
            return event_stream(events, request, gen.uid, gen.release)
        return JSONResponse(await completion_body(gen, kind, model, request))
    except RequestError as e:  # 被拒绝（400/499/503），或者生成到一半后端挂了（503）
        return openai_error(e.status, e.message, e.param)


@app.get("/metrics")
async def metrics() -> PlainTextResponse:
    state = get_state()
    state.start_listening()  # 还没有任何请求时，调度器报来的账目也要有人收
    return PlainTextResponse(state.metrics.render(), media_type="text/plain; version=0.0.4")


app.add_middleware(RequestSizeLimit)


# << ch16
@app.post("/generate", response_model=None)
async def generate(req: GenerateRequest, request: Request) -> Response:
    state = get_state()
    # ~~ ch15 < ch16
    # ~ uid = await state.submit(req.prompt, req.sampling_params())
    # ~ pieces = (ack.incremental_output async for ack in state.wait_for_ack(uid))
    # ~ return event_stream(generate_events(pieces), request, uid, state.abort_if_unfinished, uid)
    # ~~
    # >> ch16
    try:  # 和两个 OpenAI 接口一样的生成过程：被拒绝时是一个 JSON 错误，而不是开了头的流
        gen = await Generation.start(state, req.prompt, req.sampling_params(), request=request)
    except RequestError as e:
        return openai_error(e.status, e.message, e.param)
    return event_stream(generate_events(gen.deltas()), request, gen.uid, gen.release)
    # << ch16


@app.get("/v1/models")
async def v1_models() -> dict[str, Any]:
    model = str(get_state().config.model_path)
    card = {"id": model, "object": "model", "created": int(time.time()), "owned_by": "minisgl"}
    return {"object": "list", "data": [card]}


@app.get("/health", response_model=None)
async def health() -> Response:
    """负载均衡器、Kubernetes 的存活探针看这里。"""
    # >> ch17
    failure = _STATE.failure if _STATE is not None else None
    if failure is not None:  # 后端挂了：503
        return openai_error(503, failure)
    # << ch17
    return JSONResponse({"status": "ok"})


# >> ch17
FAILURE_GRACE = 2.0  # 后端挂了之后，HTTP 服务再坚持几秒，把 503 送到客户端


# << ch17
def run_http(sock: socket.socket) -> None:
    """在已经 bind 好的 socket 上服务，直到收到 Ctrl-C 或 SIGTERM。"""
    config = uvicorn.Config(
        app,
        log_level="warning",  # 启动信息由启动器自己打印；每个请求一行的访问日志太吵
        access_log=False,
        # 优雅关闭最多等几秒：正在流式输出的长请求不应该让 Ctrl-C 迟迟不生效
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    # >> ch17
    if _STATE is not None:  # 后端出故障时，FrontendManager.fail() 让它退出
        _STATE.http_server = server
    # << ch17
    server.run(sockets=[sock])
