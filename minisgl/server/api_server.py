"""API Server：FastAPI 应用和它的路由，把 OpenAI 格式的请求交给前端，把回复写回客户端。

- ``POST /v1/chat/completions``、``POST /v1/completions``：OpenAI 的两个生成接口，
  ``stream=true`` 时返回 SSE，否则返回一个 JSON；
- ``POST /generate``：最简单的流式接口，``prompt`` + ``max_tokens``，每段增量文本一条 SSE；
- ``GET /v1/models``、``GET /health``（也接受 ``HEAD``）、``GET /metrics``。

这个文件只管 HTTP：路由、SSE 与错误体的编码。请求体的格式和响应的 JSON 形状在 ``protocol.py``，
按 uid 分发回复的 ``FrontendManager`` 在 ``frontend.py``，一个请求的生成过程在
``completions.py``，请求体大小的限制在 ``middleware.py``。不合法的请求一律得到 400 和 OpenAI
格式的 ``{"error": {...}}``，不会变成 500。
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException

from minisgl.utils import init_logger

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
GRACEFUL_SHUTDOWN_S = 3  # 收到 Ctrl-C、SIGTERM 以后，最多再等进行中的请求几秒

# >> ch16
from fastapi.responses import PlainTextResponse

from .completions import Generation, RequestError
from .frontend import FrontendManager, get_state, init_frontend
from .middleware import RequestSizeLimit
from .protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    GenerateRequest,
    Kind,
    completion_body,
    stream_events,
)

__all__ += ["CompletionRequest"]

# << ch16
# >> ch17
import functools
import threading

# << ch17
# ++ server/protocol.py < ch16
# ++ server/completions.py < ch16
# ++ server/frontend.py < ch16
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
    events: AsyncIterator[dict[str, Any] | str], request: Request, gen: Generation
) -> StreamingResponse:
    """把一串事件编码成 SSE 流式返回。客户端断开就中止这个请求（``stream_with_cancellation``）；
    响应结束之后无论如何都运行 ``gen.release()``：客户端在流开始之前就断开时，只有它能收尾。"""
    # >> ch17
    events = error_as_event(events)
    # << ch17

    async def encode() -> AsyncIterator[bytes]:
        async for event in events:
            yield sse(event)

    return StreamingResponse(
        get_state().stream_with_cancellation(encode(), request, gen.uid),
        media_type="text/event-stream",
        background=BackgroundTask(gen.release),
    )


# >> ch17
async def error_as_event(
    events: AsyncIterator[dict[str, Any] | str],
) -> AsyncIterator[dict[str, Any] | str]:
    """生成到一半失败了（后端挂了）：流里加一条 OpenAI 格式的错误事件，不再有 ``[DONE]``。"""
    try:
        async for event in events:
            yield event
    except RequestError as e:
        yield error_body(e.status, e.message, e.param)


# << ch17
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


# >> ch16
@app.exception_handler(RequestError)
async def _on_request_error(request: Request, exc: RequestError) -> JSONResponse:
    """生成没能开始：被拒绝（400）、客户端已经走了（499）、后端挂了（503）。"""
    return openai_error(exc.status, exc.message, exc.param)


# << ch16
@app.exception_handler(Exception)
async def _on_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    logger.exception(f"unexpected error while handling {request.url.path}")
    return openai_error(500, f"internal error: {type(exc).__name__}")


# ---------------------------------------------------------------- 路由


@app.post("/v1/chat/completions", response_model=None)
async def v1_chat_completions(req: ChatCompletionRequest, request: Request) -> Response:
    return await serve_completion(req, request, "chat")


# >> ch16
@app.post("/v1/completions", response_model=None)
async def v1_completions(req: CompletionRequest, request: Request) -> Response:
    return await serve_completion(req, request, "text")


# << ch16
async def serve_completion(req: ChatCompletionRequest, request: Request, kind: Kind) -> Response:
    """生成接口共用：发出请求，再流式或非流式地返回。"""
    state = get_state()
    # >> ch16
    limit = state.context_length()
    if req.token_limit is not None and req.token_limit > limit:
        name = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
        message = f"{name}={req.token_limit} exceeds the model's context length of {limit} tokens"
        raise RequestError(400, message, name)
    # << ch16
    model = req.model or str(state.config.model_path)
    gen = await Generation.start(
        state,
        req.text(),
        req.sampling_params(),
        # >> ch16
        req.stop_strings,
        request,
        # << ch16
    )
    if req.stream:
        events = stream_events(
            gen,
            kind,
            model,
            # >> ch16
            include_usage=req.stream_options is not None and req.stream_options.include_usage,
            # << ch16
            # >> ch19
            continuous_usage=req.stream_options is not None
            and req.stream_options.continuous_usage_stats,
            # << ch19
        )
        return event_stream(events, request, gen)
    return JSONResponse(await completion_body(gen, kind, model, request))


# >> ch16
@app.get("/metrics")
async def metrics() -> PlainTextResponse:
    state = get_state()
    state.start_listening()  # 还没有任何请求时，调度器报来的账目也要有人收
    return PlainTextResponse(state.metrics.render(), media_type="text/plain; version=0.0.4")


app.add_middleware(RequestSizeLimit)


# << ch16
async def generate_events(pieces: AsyncIterator[str]) -> AsyncIterator[str]:
    """``/generate`` 的事件：每段增量文本编码成一个 JSON 字符串（文本里的换行不会把一条事件拆成
    两行），最后 ``[DONE]``。"""
    async for text in pieces:
        yield json.dumps(text, ensure_ascii=False)
    yield "[DONE]"


@app.post("/generate", response_model=None)
async def generate(req: GenerateRequest, request: Request) -> Response:
    gen = await Generation.start(
        get_state(),
        req.prompt,
        req.sampling_params(),
        # >> ch16
        request=request,
        # << ch16
    )
    return event_stream(generate_events(gen.deltas()), request, gen)


@app.get("/v1/models")
async def v1_models() -> dict[str, Any]:
    model = str(get_state().config.model_path)
    card = {"id": model, "object": "model", "created": int(time.time()), "owned_by": "minisgl"}
    return {"object": "list", "data": [card]}


@app.api_route("/health", methods=["GET", "HEAD"], response_model=None)
async def health() -> Response:
    """负载均衡器、Kubernetes 的存活探针看这里。"""
    # >> ch17
    failure = get_state().failure
    if failure is not None:  # 后端挂了：503
        return openai_error(503, failure)
    # << ch17
    return JSONResponse({"status": "ok"})


# >> ch17
def _answer_unfinished_on_exit(server: uvicorn.Server) -> None:
    """uvicorn 收到 Ctrl-C、SIGTERM 以后不再接受新连接，等进行中的请求跑完，最多等
    ``GRACEFUL_SHUTDOWN_S`` 秒；到时取消它们——被取消的处理函数只剩一个纯文本的 500，流式的
    响应半路断开，没有错误事件。所以一收到信号，还没跑完的请求就由 ``FrontendManager.fail``
    各得到一条错误回复：非流式的是 OpenAI 格式的 503，流式的以错误事件结束，整段宽限期都留给
    把它们送到客户端。

    uvicorn 在 ``run`` 里把 ``server.handle_exit`` 装成这两个信号的处理函数：这里把它换成先叫醒
    等待者、再照常处理的版本。叫醒放在另一个线程里：信号处理函数运行时，事件循环正停在某一行
    字节码上，不该从这里动它的数据结构，``fail_from_thread`` 经 ``call_soon_threadsafe`` 回去。"""
    handle_exit = server.handle_exit

    def answer_then_exit(sig: int, frame: Any) -> None:
        if not server.should_exit:  # 第一次收到；再按一次 Ctrl-C 是 uvicorn 的立即退出
            stop = functools.partial(get_state().fail_from_thread, stopping=True)
            threading.Thread(
                target=stop, args=("the server is shutting down",), daemon=True
            ).start()
        handle_exit(sig, frame)

    server.handle_exit = answer_then_exit  # type: ignore[method-assign]


# << ch17
def run_http(sock: socket.socket) -> None:
    """在已经 bind 好的 socket 上服务，直到收到 Ctrl-C 或 SIGTERM。"""
    config = uvicorn.Config(
        app,
        log_level="warning",  # 启动信息由启动器自己打印；每个请求一行的访问日志太吵
        access_log=False,
        # 优雅关闭最多等几秒：正在流式输出的长请求不应该让 Ctrl-C 迟迟不生效
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    server = uvicorn.Server(config)
    # >> ch17
    get_state().http_server = server  # 后端出故障时，FrontendManager.fail() 让它退出
    _answer_unfinished_on_exit(server)
    # << ch17
    server.run(sockets=[sock])
