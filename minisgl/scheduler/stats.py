"""调度器报账：rank 0 把此刻的账目推给 API Server，``/metrics`` 原样报告。

KV 池、请求表、排队的请求只有调度器知道。API Server 去问调度器，需要一条请求-应答的通道，
而调度器的主循环忙着跑前向；所以反过来，调度器每步之后主动报账：有变化才报，忙的时候最多每
``STATS_INTERVAL`` 秒一次，刚忙起来、刚闲下来时不限频。账目直接推到 API Server 的接收地址，不经过
detokenizer。
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from minisgl.message import BaseFrontendMsg, SchedulerStats
from minisgl.utils import ZmqPushQueue

if TYPE_CHECKING:
    from .scheduler import Scheduler

__all__ = ["STATS_INTERVAL", "StatsPublisher", "snapshot"]

STATS_INTERVAL = 0.1  # 忙的时候最多每 0.1 秒报一次账


def snapshot(scheduler: Scheduler) -> SchedulerStats:
    """调度器此刻的账目。"""
    cache = scheduler.cache
    return SchedulerStats(
        running=len(scheduler.live_reqs()),
        waiting=len(scheduler.prefill_manager.pending),
        kv_pages_total=cache.num_pages,
        kv_pages_free=cache.num_free_pages,
        kv_pages_cached=cache.prefix_cache.size_info[0],  # 没人用、可以淘汰的前缀缓存
        rows_free=scheduler.table.num_free,
        rows_total=scheduler.config.max_running_reqs,
        # >> ch17
        retracted=scheduler.stats["retracted"],
        # << ch17
        # >> ch19
        sampled=scheduler.stats["sampled"],
        triton_compiles=scheduler.stats["triton_compiles"],
        steps=scheduler.stats["prefill_steps"] + scheduler.stats["decode_steps"],
        gpu_wait_s=scheduler.stats["gpu_wait_us"] / 1e6,
        # << ch19
    )


class StatsPublisher:
    """把调度器的账目推给 ``addr``（API Server 的接收地址）。"""

    def __init__(self, addr: str, interval: float = STATS_INTERVAL) -> None:
        self.addr, self.interval = addr, interval
        self.queue: ZmqPushQueue[BaseFrontendMsg] | None = None
        self.last: SchedulerStats | None = None
        self.last_at = 0.0

    def publish(self, scheduler: Scheduler, force: bool = False) -> None:
        """账目变了就发；``force`` 时不限频。"""
        now = time.monotonic()
        if not force and now - self.last_at < self.interval:
            return  # 先看限频再算快照：这在每一步的热路径上
        stats = snapshot(scheduler)
        if stats == self.last:
            return
        if self.queue is None:  # 第一次用到时再连：调度器进程里 API Server 早已 bind 好
            self.queue = ZmqPushQueue(self.addr, create=False, encoder=BaseFrontendMsg.encoder)
        self.queue.put(stats)
        self.last, self.last_at = stats, now

    def stop(self) -> None:
        if self.queue is not None:
            self.queue.stop()
