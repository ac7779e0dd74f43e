"""tokenizer 进程：把文本变成 token 送给调度器，把调度器生成的 token 变回文本送给 API Server。

- ``tokenize``：文本或对话（套对话模板）→ 1 维 int32 张量；
- ``detokenize``：一个一个到来的 token → 一段一段的增量文本，不会把一个字符切成两半；
- ``server``：进程的主循环 ``tokenize_worker``，在 ZMQ 队列之间收发消息。
"""

from __future__ import annotations

from .detokenize import DecodeState, DetokenizeManager
from .server import TokenizerWorker, tokenize_worker
from .tokenize import TokenizeManager

__all__ = [
    "DecodeState",
    "DetokenizeManager",
    "TokenizeManager",
    "TokenizerWorker",
    "tokenize_worker",
]
