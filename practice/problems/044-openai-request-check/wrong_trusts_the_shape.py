"""错误答案：检查了字段的值，却假设 body 一定是对象、每条 message 一定是对象——
遇到 [1, 2] 或者 {"messages": [null]} 时抛出异常（在服务里就是一个 500）。"""

from __future__ import annotations

import json
import math
from typing import Any

ROLES = ("system", "user", "assistant")


def error_body(message: str, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    }


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_request(raw: bytes) -> tuple[int, dict[str, Any]]:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return 400, error_body(f"not valid JSON: {e}")
    messages, prompt = body.get("messages"), body.get("prompt")  # 错：body 可能不是 dict
    if (messages is None) == (prompt is None):
        return 400, error_body("exactly one of 'messages' and 'prompt' must be provided")
    if messages is not None:
        if not isinstance(messages, list) or not messages:
            return 400, error_body("messages: must be a non-empty list", "messages")
        for i, m in enumerate(messages):
            if m.get("role") not in ROLES:  # 错：m 可能不是 dict
                return 400, error_body(f"messages.{i}.role: bad role", f"messages.{i}.role")
            if not isinstance(m.get("content"), str):
                where = f"messages.{i}.content"
                return 400, error_body(f"{where}: must be a string", where)
        text: Any = [{"role": m["role"], "content": m["content"]} for m in messages]
    else:
        if not isinstance(prompt, str) or not prompt:
            return 400, error_body("prompt: must be a non-empty string", "prompt")
        text = prompt
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and not (
        isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1
    ):
        return 400, error_body("max_tokens: must be an integer >= 1", "max_tokens")
    temperature = body.get("temperature", 1.0)
    if not (_number(temperature) and 0 <= temperature <= 2):
        return 400, error_body("temperature: must be in [0, 2]", "temperature")
    top_p = body.get("top_p", 1.0)
    if not (_number(top_p) and 0 < top_p <= 1):
        return 400, error_body("top_p: must be in (0, 1]", "top_p")
    n = body.get("n", 1)
    if not (isinstance(n, int) and not isinstance(n, bool) and n == 1):
        return 400, error_body("n: only n=1 is supported", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        return 400, error_body("stream: must be a boolean", "stream")
    out = {"text": text, "max_tokens": max_tokens, "temperature": float(temperature)}
    return 200, {**out, "top_p": float(top_p), "stream": stream}
