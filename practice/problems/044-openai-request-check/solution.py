"""参考答案：按固定顺序逐项检查，报告第一个问题；每个假设（是 dict、是 list……）都先检查再使用。"""

from __future__ import annotations

import json
import math
from typing import Any

ROLES = ("system", "user", "assistant")


def error_body(message: str, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    }


class _Invalid(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param = message, param


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)  # True 是 int 的子类，但不是数字


def _is_number(x: Any) -> bool:
    return (_is_int(x) or isinstance(x, float)) and math.isfinite(x)


def _messages(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise _Invalid("messages: must be a non-empty list", "messages")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict):
            raise _Invalid(f"messages.{i}: must be an object", f"messages.{i}")
        if m.get("role") not in ROLES:
            where = f"messages.{i}.role"
            raise _Invalid(f"{where}: must be one of {', '.join(ROLES)}", where)
        if not isinstance(m.get("content"), str):
            where = f"messages.{i}.content"
            raise _Invalid(f"{where}: must be a string", where)
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _check(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError 是 ValueError 的子类
        raise _Invalid(f"the request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise _Invalid("the request body must be a JSON object")
    messages, prompt = body.get("messages"), body.get("prompt")
    if (messages is None) == (prompt is None):
        if messages is None:
            raise _Invalid("either 'messages' or 'prompt' must be provided")
        raise _Invalid("provide only one of 'messages' and 'prompt'")
    if messages is not None:
        text: Any = _messages(messages)
    else:
        if not isinstance(prompt, str) or not prompt:
            raise _Invalid("prompt: must be a non-empty string", "prompt")
        text = prompt
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and not (_is_int(max_tokens) and max_tokens >= 1):
        raise _Invalid("max_tokens: must be an integer >= 1", "max_tokens")
    temperature = body.get("temperature", 1.0)
    if not (_is_number(temperature) and 0 <= temperature <= 2):
        raise _Invalid("temperature: must be a number in [0, 2]", "temperature")
    top_p = body.get("top_p", 1.0)
    if not (_is_number(top_p) and 0 < top_p <= 1):
        raise _Invalid("top_p: must be a number in (0, 1]", "top_p")
    n = body.get("n", 1)
    if not (_is_int(n) and n == 1):
        raise _Invalid("n: only n=1 is supported", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _Invalid("stream: must be a boolean", "stream")
    return {
        "text": text,
        "max_tokens": max_tokens,
        "temperature": float(temperature),
        "top_p": float(top_p),
        "stream": stream,
    }


def check_request(raw: bytes) -> tuple[int, dict[str, Any]]:
    try:
        return 200, _check(raw)
    except _Invalid as e:
        return 400, error_body(e.message, e.param)
