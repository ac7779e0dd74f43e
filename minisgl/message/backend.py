"""发往调度器（后端）的消息：tokenizer 把分好词的请求、中止请求送进来，启动器让它退出。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from minisgl.core import SamplingParams

from .utils import class_table, deserialize_type, serialize_type

__all__ = ["AbortBackendMsg", "BaseBackendMsg", "BatchBackendMsg", "ExitMsg", "UserMsg"]


@dataclass
class BaseBackendMsg:
    """这一组消息的基类。``encoder`` / ``decoder`` 交给 ZMQ 队列：``BaseBackendMsg.encoder``。"""

    def encoder(self) -> dict[str, Any]:
        return serialize_type(self)

    @staticmethod
    def decoder(data: Any) -> BaseBackendMsg:
        # 只认本模块里的 dataclass（包括导入进来的 SamplingParams）
        return deserialize_type(_CLASSES, data)


@dataclass
class BatchBackendMsg(BaseBackendMsg):
    """把多条消息打包成一条发送，减少 ZMQ 消息的条数。"""

    data: list[BaseBackendMsg]


@dataclass
class ExitMsg(BaseBackendMsg):
    """让调度器退出主循环。"""


@dataclass
class UserMsg(BaseBackendMsg):
    """一个分好词的新请求。"""

    uid: int
    input_ids: torch.Tensor  # CPU 上的 1 维 int32 张量
    sampling_params: SamplingParams


@dataclass
class AbortBackendMsg(BaseBackendMsg):
    """中止请求 ``uid``：客户端断开了，或者用户取消了。"""

    uid: int


_CLASSES = class_table(globals())
