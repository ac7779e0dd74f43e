"""服务里的调度器：``Scheduler`` 加上服务需要的记账。

启动器（``server/launch.py``）只负责把进程拉起来；每个 TP rank 的调度器进程里运行的是这里的
``ServingScheduler``。它在调度器的账目上做的事写在这里，和它描述的调度器放在一起。
"""

from __future__ import annotations

from typing import Any

from minisgl.utils import init_logger

from .scheduler import Scheduler

__all__ = ["ServingScheduler"]

logger = init_logger(__name__, "scheduler")  # 在调度器进程里打印

# >> ch16
import time

from minisgl.message import BaseFrontendMsg, SchedulerStats
from minisgl.utils import ZmqPushQueue

from .config import SchedulerConfig

STATS_INTERVAL = 0.1  # 忙的时候最多每 0.1 秒报一次账（/metrics 用）
# << ch16


class ServingScheduler(Scheduler):
    """服务里的调度器：每次从"有活"变成"没活"时，在日志里报一次 KV 池和请求表的账目。

    所有请求都结束（或被中止）之后，可用页应该回到总页数、请求表的行全部空闲；少了，就是有请求
    漏了释放。测试读这一行，确认客户端断开后资源真的还了回来。
    """

    busy: bool = False
    # >> ch16
    stats_queue: ZmqPushQueue[BaseFrontendMsg] | None = None
    last_stats: SchedulerStats | None = None
    last_stats_at: float = 0.0

    def __init__(self, config: SchedulerConfig, *, stats_addr: str | None = None) -> None:
        """``stats_addr``：API Server 的接收地址，账目推到那里；``None`` 时不报账。"""
        super().__init__(config)
        self.stats_addr = stats_addr

    # << ch16

    def step(self) -> list[Any]:
        outputs = super().step()
        if self.has_work:
            self.busy = True
        elif self.busy:
            self.busy = False
            self.report_kv("idle")
        # >> ch16
        self.publish_stats(force=not self.has_work)  # 变成空闲时一定报一次
        # << ch16
        return outputs

    def report_kv(self, when: str) -> None:
        cache = self.cache
        logger.info(  # 每个 rank 报自己的池子：张量并行时每个 rank 都要还回来
            f"{when}: KV pages available {cache.available_pages}/{cache.num_pages} "
            f"({cache.num_free_pages} free), free rows {self.table.num_free}/"
            f"{self.config.max_running_reqs}"
        )

    # >> ch16
    def snapshot(self) -> SchedulerStats:
        cache = self.cache
        evictable = cache.prefix_cache.size_info[0]
        return SchedulerStats(
            running=len(self.live_reqs()),
            waiting=len(self.prefill_manager.pending),
            kv_pages_total=cache.num_pages,
            kv_pages_free=cache.num_free_pages,
            kv_pages_cached=evictable,
            rows_free=self.table.num_free,
            rows_total=self.config.max_running_reqs,
        )

    def publish_stats(self, force: bool = False) -> None:
        """账目变了就发给 API Server（只有 rank 0 发）；忙的时候限频，``force`` 时不限。"""
        if self.stats_addr is None or not self.config.tp_info.is_primary():
            return
        now = time.monotonic()
        if not force and now - self.last_stats_at < STATS_INTERVAL:
            return  # 先看限频再算快照：这在每一步的热路径上
        stats = self.snapshot()
        if stats == self.last_stats:
            return
        if self.stats_queue is None:  # 直接连到 API Server 的接收地址，不经过 detokenizer
            self.stats_queue = ZmqPushQueue(
                self.stats_addr, create=False, encoder=BaseFrontendMsg.encoder
            )
        self.stats_queue.put(stats)
        self.last_stats, self.last_stats_at = stats, now

    def shutdown(self) -> None:
        if self.stats_queue is not None:
            self.stats_queue.stop()
        super().shutdown()

    # << ch16
