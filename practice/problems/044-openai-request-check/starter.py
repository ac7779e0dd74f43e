"""练习 044：校验 OpenAI 格式的请求——合法的规范化，不合法的回 400 和 OpenAI 格式的错误。"""

from __future__ import annotations

from typing import Any


def error_body(message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI 格式的错误体。"""
    raise NotImplementedError("在这里实现 error_body")


def check_request(raw: bytes) -> tuple[int, dict[str, Any]]:
    """(200, 规范化的请求) 或 (400, error_body(...))；任何输入都不抛异常。"""
    raise NotImplementedError("在这里实现 check_request")
