"""错误答案：用 isinstance(x, int) 判断整数——JSON 里的 true 被当成了 max_tokens=1。"""

from __future__ import annotations

import json
import math
from typing import Any

ROLES = ("system", "user", "assistant")


def error_body(message: str, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    }


def _bad(message: str, param: str | None = None) -> tuple[int, dict[str, Any]]:
    return 400, error_body(message, param)


def check_request(raw: bytes) -> tuple[int, dict[str, Any]]:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return _bad(f"not valid JSON: {e}")
    if not isinstance(body, dict):
        return _bad("the request body must be a JSON object")
    messages, prompt = body.get("messages"), body.get("prompt")
    if (messages is None) == (prompt is None):
        return _bad("exactly one of 'messages' and 'prompt' must be provided")
    if messages is not None:
        if not isinstance(messages, list) or not messages:
            return _bad("messages: must be a non-empty list", "messages")
        text: Any = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                return _bad(f"messages.{i}: must be an object", f"messages.{i}")
            if m.get("role") not in ROLES:
                return _bad(f"messages.{i}.role: bad role", f"messages.{i}.role")
            if not isinstance(m.get("content"), str):
                return _bad(f"messages.{i}.content: must be a string", f"messages.{i}.content")
            text.append({"role": m["role"], "content": m["content"]})
    else:
        if not isinstance(prompt, str) or not prompt:
            return _bad("prompt: must be a non-empty string", "prompt")
        text = prompt
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and not (isinstance(max_tokens, int) and max_tokens >= 1):  # 错
        return _bad("max_tokens: must be an integer >= 1", "max_tokens")
    temperature = body.get("temperature", 1.0)
    ok = isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
    if not (ok and math.isfinite(temperature) and 0 <= temperature <= 2):
        return _bad("temperature: must be in [0, 2]", "temperature")
    top_p = body.get("top_p", 1.0)
    ok = isinstance(top_p, (int, float)) and not isinstance(top_p, bool)
    if not (ok and math.isfinite(top_p) and 0 < top_p <= 1):
        return _bad("top_p: must be in (0, 1]", "top_p")
    n = body.get("n", 1)
    if not (isinstance(n, int) and not isinstance(n, bool) and n == 1):
        return _bad("n: only n=1 is supported", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        return _bad("stream: must be a boolean", "stream")
    out = {"text": text, "max_tokens": max_tokens, "temperature": float(temperature)}
    return 200, {**out, "top_p": float(top_p), "stream": stream}
