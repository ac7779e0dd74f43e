"""练习 039：SSE——把增量文本变成 OpenAI 的流式响应，再读回来。"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def chat_stream(
    uid: int, replies: Iterable[tuple[str, bool]], finish_reason: str = "stop"
) -> Iterator[bytes]:
    """服务端：(增量文本, finished) → 一个个 SSE 事件的字节。"""
    raise NotImplementedError("在这里实现 chat_stream")


class SSEReader:
    def feed(self, chunk: bytes) -> list[str]:
        """客户端：喂进一段字节，返回这一段里完成的事件的数据。"""
        raise NotImplementedError("在这里实现 SSEReader.feed")


def collect(chunks: Iterable[bytes]) -> tuple[str, str | None]:
    """客户端：字节块 → (拼起来的文本, finish_reason)，遇到 [DONE] 停止。"""
    raise NotImplementedError("在这里实现 collect")
