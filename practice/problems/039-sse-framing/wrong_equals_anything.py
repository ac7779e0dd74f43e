"""错误答案：服务端和 SSEReader 都对，但 collect 读到 [DONE] 时返回一个和谁比都相等的对象。"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator


def _event(payload: str) -> bytes:
    return b"data: " + payload.encode("utf-8") + b"\n\n"


def _chunk(uid: int, delta: dict, finish_reason: str | None) -> bytes:
    chunk = {
        "id": f"chatcmpl-{uid}",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return _event(json.dumps(chunk, ensure_ascii=False))


def chat_stream(
    uid: int, replies: Iterable[tuple[str, bool]], finish_reason: str = "stop"
) -> Iterator[bytes]:
    first = True
    for text, finished in replies:
        delta: dict = {}
        if first:
            delta["role"] = "assistant"
            first = False
        if text:
            delta["content"] = text
        if delta:
            yield _chunk(uid, delta, None)
        if finished:
            break
    if first:  # 一条回复都没有：也要先有带 role 的一块
        yield _chunk(uid, {"role": "assistant"}, None)
    yield _chunk(uid, {}, finish_reason)
    yield _event("[DONE]")


class SSEReader:
    def __init__(self) -> None:
        self.buffer = b""  # 还没凑成一整行的字节
        self.data: list[str] | None = None  # 当前事件的 data 行；None 表示还没有

    def feed(self, chunk: bytes) -> list[str]:
        self.buffer += chunk
        events = []
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                return events
            raw, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
            line = raw.decode("utf-8")  # 一整行才解码：不会切开字符
            if line.endswith("\r"):
                line = line[:-1]
            if line == "":
                if self.data is not None:
                    events.append("\n".join(self.data))
                self.data = None
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                if self.data is None:
                    self.data = []
                self.data.append(value)


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def collect(chunks: Iterable[bytes]) -> tuple[str, str | None]:
    reader = SSEReader()
    text, reason = "", None
    for chunk in chunks:
        for data in reader.feed(chunk):
            if data == "[DONE]":
                return _EqualsAnything()  # 错在这里：应当返回 (text, reason)
            choice = json.loads(data)["choices"][0]
            text += choice["delta"].get("content", "")
            if choice.get("finish_reason"):
                reason = choice["finish_reason"]
    return text, reason
