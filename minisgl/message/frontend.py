"""发往 API Server（前端）的消息：detokenizer 送回的增量文本。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .utils import (
    # >> ch16
    ReplyStatus,
    # << ch16
    class_table,
    deserialize_type,
    serialize_type,
)

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
    # >> ch16
    status: ReplyStatus = ReplyStatus()  # 调度器算出的结束原因和用量，DetokenizeMsg 原样带来
    # << ch16


# >> ch16
@dataclass
class SchedulerStats(BaseFrontendMsg):
    """调度器 rank 0 → API Server：调度器此刻的账目，``/metrics`` 原样报告。

    调度器的状态只有调度器知道；每步之后有变化就发一条（忙的时候最多每 0.1 秒一条，
    变成空闲时一定发一条），API Server 只保留最新的一条。
    """

    running: int  # 在跑的请求（包括正在分块预填充的）
    waiting: int  # 排队等着进批次的请求
    kv_pages_total: int
    kv_pages_free: int  # 空闲页
    kv_pages_cached: int  # 前缀缓存里没人用、可以淘汰的页
    rows_free: int  # 请求表的空闲行
    rows_total: int
    # >> ch17
    retracted: int = 0  # 开服以来，decode 缺页时退回等待队列的次数（第 17 章）
    # << ch17
    # >> ch19
    sampled: int = 0  # 开服以来采样出的 token 数：GPU 真正算过的，客户端不一定都收到（第 19 章）
    triton_compiles: int = 0  # 开服以来 Triton 新编译的 kernel 数（第 19 章）
    steps: int = 0  # 开服以来前向的步数，prefill 和 decode 都算（第 19 章）
    gpu_wait_s: float = 0.0  # 开服以来主机等 GPU 算完一步的总时间（秒，重叠调度时；第 19 章）
    # << ch19


__all__ += ["SchedulerStats"]
# << ch16
_CLASSES = class_table(globals())
