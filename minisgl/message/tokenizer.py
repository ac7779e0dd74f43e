"""发往 tokenizer / detokenizer 进程的消息：API Server 送来要分词的请求，调度器送来新 token。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minisgl.core import SamplingParams

from .utils import (
    # >> ch16
    ReplyStatus,
    # << ch16
    class_table,
    deserialize_type,
    serialize_type,
)

__all__ = ["AbortMsg", "BaseTokenizerMsg", "BatchTokenizerMsg", "DetokenizeMsg", "TokenizeMsg"]


@dataclass
class BaseTokenizerMsg:
    """这一组消息的基类。"""

    def encoder(self) -> dict[str, Any]:
        return serialize_type(self)

    @staticmethod
    def decoder(data: Any) -> BaseTokenizerMsg:
        return deserialize_type(_CLASSES, data)


@dataclass
class BatchTokenizerMsg(BaseTokenizerMsg):
    """把多条消息打包成一条发送。"""

    data: list[BaseTokenizerMsg]


@dataclass
class TokenizeMsg(BaseTokenizerMsg):
    """API Server → tokenizer：一段文本，或者一段对话 ``[{"role": ..., "content": ...}]``。"""

    uid: int
    text: str | list[dict[str, str]]
    sampling_params: SamplingParams


@dataclass
class DetokenizeMsg(BaseTokenizerMsg):
    """调度器 → detokenizer：请求 ``uid`` 生成了一个新 token，以及它是否已经结束。"""

    uid: int
    next_token: int
    finished: bool
    # >> ch16
    status: ReplyStatus = ReplyStatus()  # 为什么结束、用了多少 token：原样转给 API Server
    # << ch16


@dataclass
class AbortMsg(BaseTokenizerMsg):
    """API Server → tokenizer：中止请求 ``uid``，tokenizer 再转给调度器。"""

    uid: int


_CLASSES = class_table(globals())
