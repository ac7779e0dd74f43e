"""调度器：把一个个请求排进批次，驱动 Engine 一步一步地生成。

- ``config``：``SchedulerConfig``（Engine 的配置 + 预算、前缀缓存）；
- ``utils``：排队的请求、运行中的请求、每一步的输出；
- ``table``：页表行的分配；``cache``：KV 页的账目；
- ``prefill`` / ``decode``：接纳新请求、运行中的请求；
- ``io``：命令从哪里来、输出到哪里去；``scheduler``：主循环。
"""

from __future__ import annotations

from .cache import CacheManager
from .config import SchedulerConfig
from .decode import DecodeManager
from .io import ExitReq, LocalIO, SchedulerCommand, SchedulerIO
from .prefill import PrefillManager
from .scheduler import ForwardOutput, Scheduler
from .table import ReqTable
from .utils import FinishReason, PendingReq, SchedReq, TokenOutput

__all__ = [
    "CacheManager",
    "DecodeManager",
    "ExitReq",
    "FinishReason",
    "ForwardOutput",
    "LocalIO",
    "PendingReq",
    "PrefillManager",
    "ReqTable",
    "SchedReq",
    "Scheduler",
    "SchedulerCommand",
    "SchedulerConfig",
    "SchedulerIO",
    "TokenOutput",
]

# >> ch11
from .utils import AbortReq

__all__ += ["AbortReq"]
# << ch11
# >> ch14
from .io import ZmqIO, to_commands
from .scheduler import run_scheduler

__all__ += ["ZmqIO", "run_scheduler", "to_commands"]
# << ch14
