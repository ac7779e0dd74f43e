"""张量并行的"我是谁"（``info``）。第 3 章在这里加上 rank 之间的通信（``impl``）。"""

from __future__ import annotations

# >> ch03
from .impl import DistributedCommunicator

# << ch03
from .info import DistributedInfo, get_tp_info, reset_tp_info, set_tp_info

__all__ = [
    # >> ch03
    "DistributedCommunicator",
    # << ch03
    "DistributedInfo",
    "get_tp_info",
    "reset_tp_info",
    "set_tp_info",
]
# >> ch06
from .impl import destroy_distributed, init_distributed, spawn_ranks

__all__ += ["destroy_distributed", "init_distributed", "spawn_ranks"]
# << ch06
# >> ch14
from .impl import cpu_group

__all__ += ["cpu_group"]
# << ch14
