"""进程之间的消息，按接收方分成三组，每组一个基类、各自在自己的模块里解码：

- ``tokenizer``：发给 tokenizer / detokenizer（``TokenizeMsg``、``DetokenizeMsg``、``AbortMsg``）；
- ``backend``：发给调度器（``UserMsg``、``AbortBackendMsg``、``ExitMsg``）；
- ``frontend``：发给 API Server（``UserReply``）。

每组还有一个 ``Batch...Msg`` 把多条打包成一条。序列化的规则在 ``utils``。
"""

from __future__ import annotations

from .backend import AbortBackendMsg, BaseBackendMsg, BatchBackendMsg, ExitMsg, UserMsg
from .frontend import BaseFrontendMsg, BatchFrontendMsg, UserReply
from .tokenizer import AbortMsg, BaseTokenizerMsg, BatchTokenizerMsg, DetokenizeMsg, TokenizeMsg
from .utils import MessageDecodeError, deserialize_type, serialize_type

__all__ = [
    # 发给调度器
    "AbortBackendMsg",
    "BaseBackendMsg",
    "BatchBackendMsg",
    "ExitMsg",
    "UserMsg",
    # 发给 API Server
    "BaseFrontendMsg",
    "BatchFrontendMsg",
    "UserReply",
    # 发给 tokenizer / detokenizer
    "AbortMsg",
    "BaseTokenizerMsg",
    "BatchTokenizerMsg",
    "DetokenizeMsg",
    "TokenizeMsg",
    # 序列化
    "MessageDecodeError",
    "deserialize_type",
    "serialize_type",
]

# >> ch16
from .frontend import SchedulerStats
from .utils import ReplyStatus

__all__ += ["ReplyStatus", "SchedulerStats"]
# << ch16
