"""发往 API Server（前端）的消息：detokenizer 送回的增量文本。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .utils import class_table, deserialize_type, serialize_type

__all__ = ["BaseFrontendMsg", "BatchFrontendMsg", "UserReply"]


@dataclass
class BaseFrontendMsg:
    """这一组消息的基类。"""

    def encoder(self) -> dict[str, Any]:
        return serialize_type(self)

    @staticmethod
    def decoder(data: Any) -> BaseFrontendMsg:
        return deserialize_type(_CLASSES, data)


@dataclass
class BatchFrontendMsg(BaseFrontendMsg):
    """把多条消息打包成一条发送。"""

    data: list[BaseFrontendMsg]


@dataclass
class UserReply(BaseFrontendMsg):
    """请求 ``uid`` 新增的一段文本；``finished`` 为 True 时这是它的最后一条。"""

    uid: int
    incremental_output: str
    finished: bool


_CLASSES = class_table(globals())
