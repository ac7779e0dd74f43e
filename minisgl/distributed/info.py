"""本进程在张量并行（TP）里的位置：第几个 rank、一共几个 rank。

加载权重时要知道"我该拿哪一份"，算子层要知道"切成几份"，日志要在行首标出 rank——
这些都来自同一个全局的 ``DistributedInfo``。启动时（第 6 章起每个 rank 一个进程）调用一次
``set_tp_info(rank, size)``；从来没有设置过的进程就是单卡：rank 0，一共 1 个。
"""

from __future__ import annotations

from dataclasses import dataclass

from minisgl.utils.logger import set_log_rank

__all__ = ["DistributedInfo", "get_tp_info", "reset_tp_info", "set_tp_info"]


@dataclass(frozen=True)
class DistributedInfo:
    """TP 里的一个位置：``size`` 个 rank 编号为 0..size-1，rank 0 是"主"rank，
    负责打印日志和对外通信。"""

    rank: int
    size: int

    def __post_init__(self) -> None:
        # 用 raise 而不是 assert：python -O 会删掉断言，rank=2、size=2 会一路走到切权重时才出错
        if self.size < 1:
            raise ValueError(f"tp size must be >= 1, got {self.size}")
        if not 0 <= self.rank < self.size:
            raise ValueError(f"tp rank must be in [0, {self.size}), got {self.rank}")

    def is_primary(self) -> bool:
        return self.rank == 0


_SINGLE = DistributedInfo(0, 1)
_tp_info: DistributedInfo | None = None


def set_tp_info(rank: int, size: int) -> DistributedInfo:
    """设置本进程的 TP 位置，同时告诉日志模块在行首标出 rank（单卡时不标）。

    同一个进程里重复设置**同样的**值没有问题（notebook 里重跑一个格子）；设置成不同的值则报错：
    一个进程中途换 rank，意味着已经按旧 rank 切好的权重全都不对了。确实要换（测试里），先调用
    ``reset_tp_info()``。
    """
    global _tp_info
    info = DistributedInfo(rank, size)
    if _tp_info is not None and _tp_info != info:
        raise RuntimeError(
            f"tp info is already set to rank={_tp_info.rank}, size={_tp_info.size}; "
            f"call reset_tp_info() before setting rank={rank}, size={size}"
        )
    _tp_info = info
    set_log_rank(rank if size > 1 else None)
    return info


def get_tp_info() -> DistributedInfo:
    """本进程的 TP 位置；从来没有设置过时就是单卡 ``DistributedInfo(0, 1)``。"""
    return _tp_info if _tp_info is not None else _SINGLE


def reset_tp_info() -> None:
    """回到"没有设置过"的状态（给测试用）。"""
    global _tp_info
    _tp_info = None
    set_log_rank(None)
