"""ASGI 中间件：在请求到达处理函数之前起作用的规则。

写成最朴素的 ASGI 中间件（一个可调用对象，包住下一层的 ``app``），而不是
``@app.middleware("http")``：后者会把 ``receive`` 包一层，流式响应里的
``request.is_disconnected()`` 可能再也看不到客户端断开。
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["MAX_REQUEST_BYTES", "RequestSizeLimit"]

MAX_REQUEST_BYTES = 8 << 20  # 8 MiB：几万 token 的提示写成 JSON 也远远不到


class RequestSizeLimit:
    """请求体超过 ``max_bytes`` 就是 413，不把它读进内存。

    两道关：声明了 Content-Length 的，第一次读就拒绝，一个字节也不读；分块传输（没有
    Content-Length）的，边读边数，超了就拒绝。拒绝的方式是在读取时抛 ``HTTPException``：
    FastAPI 读请求体时遇到它会原样抛出，由 API Server 的异常处理变成 OpenAI 格式的错误体。
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"").decode("latin-1")
        chunked = not declared.isdigit()  # 没声明长度：只能边读边数
        received = 0 if chunked else int(declared)
        too_large = f"the request body is larger than {self.max_bytes} bytes"

        async def limited_receive() -> Any:
            nonlocal received
            if received > self.max_bytes:
                raise HTTPException(413, too_large)
            message = await receive()
            if chunked and message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, too_large)
            return message

        await self.app(scope, limited_receive, send)
