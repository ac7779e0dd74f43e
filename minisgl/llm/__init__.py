"""离线推理的入口：``from minisgl.llm import LLM``。"""

from __future__ import annotations

from .llm import LLM, RequestOutput

__all__ = ["LLM", "RequestOutput"]
