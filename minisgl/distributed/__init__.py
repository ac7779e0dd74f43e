"""张量并行：每个进程的"我是谁"（``info``）和 rank 之间的通信（``impl``）。"""

from __future__ import annotations

from .info import DistributedInfo, get_tp_info, reset_tp_info, set_tp_info

__all__ = ["DistributedInfo", "get_tp_info", "reset_tp_info", "set_tp_info"]
# >> ch03
from .impl import DistributedCommunicator

__all__ += ["DistributedCommunicator"]
# << ch03
# >> ch06
from .impl import destroy_distributed, init_distributed, spawn_ranks

__all__ += ["destroy_distributed", "init_distributed", "spawn_ranks"]
# << ch06
# >> ch14
from .impl import cpu_group

__all__ += ["cpu_group"]
# << ch14
