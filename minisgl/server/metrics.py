"""``/metrics``：Prometheus 的文本格式，监控系统每隔几秒来抓一次。

格式很简单，一个指标一段::

    # HELP minisgl_prompt_tokens_total 所有请求的提示 token 数之和。
    # TYPE minisgl_prompt_tokens_total counter
    minisgl_prompt_tokens_total 1234

三种指标：

- counter（只增不减的累计值：token 数、请求数）：监控系统自己做差、算速率；
- gauge（此刻的值：在跑的请求、空闲的 KV 页）；
- histogram（分布：每个请求的用时）：按一组上界（bucket）累计"不超过这个值的有几个"，
  外加总和与个数，监控系统据此估算分位数。``le="+Inf"`` 那一格等于总个数。

数据有两个来源：API Server 自己看得到的（请求的开始、第一个 token、结束、用量），以及调度器
发来的 ``SchedulerStats``（排队的、在跑的、KV 池和请求表的账目），后者只保留最新的一条。
这里不依赖 ``prometheus_client``：几十行就能写完，也看得清格式本身。
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field, fields

from minisgl.message import SchedulerStats

__all__ = ["Histogram", "Metrics"]

PREFIX = "minisgl_"
# 秒：从几毫秒（小模型的一个 token）到几分钟（长生成）
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass
class Histogram:
    """固定上界的直方图。``counts[i]`` 是落在第 i 格（不超过 ``buckets[i]``、大于前一格）的个数。"""

    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if list(self.buckets) != sorted(set(self.buckets)):
            raise ValueError(f"buckets must be strictly increasing, got {self.buckets}")
        self.counts = [0] * (len(self.buckets) + 1)  # 最后一格：比所有上界都大

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str) -> list[str]:
        """``_bucket``（累计的）、``_sum``、``_count`` 三组样本。"""
        out, running = [], 0
        for bound, n in zip((*self.buckets, float("inf")), self.counts):
            running += n
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            out.append(f'{name}_bucket{{le="{le}"}} {running}')
        out.append(f"{name}_sum {self.total:.6f}")
        out.append(f"{name}_count {self.count}")
        return out


# 调度器账目：SchedulerStats 的字段 → (指标名, 说明)。名字以 _total 结尾的是 counter（只增不减），
# 其余是 gauge（此刻的值）
_SCHEDULER_METRICS = {
    "running": ("running_requests", "调度器里正在运行的请求数（包括正在分块预填充的）。"),
    "waiting": ("waiting_requests", "排队等待进入批次的请求数。"),
    "kv_pages_total": ("kv_pages_capacity", "KV 池的总页数。"),
    "kv_pages_free": ("kv_pages_free", "KV 池里空闲的页数。"),
    "kv_pages_cached": ("kv_pages_cached", "前缀缓存里没人使用、可以淘汰的页数。"),
    "rows_free": ("request_rows_free", "请求表里空闲的行数。"),
    "rows_total": ("request_rows_capacity", "请求表的总行数（最多同时运行的请求数）。"),
    # >> ch17
    "retracted": ("requests_retracted_total", "decode 缺页时退回等待队列（以后重算）的次数。"),
    # << ch17
    # >> ch19
    "sampled": (
        "tokens_sampled_total",
        "调度器采样出的 token 数，包括客户端已经断开、还没来得及中止的请求的。",
    ),
    "triton_compiles": (
        "triton_compiles_total",
        "rank 0 的调度进程里 Triton 新编译的 kernel 数：服务中途编译一次，那一步慢几百毫秒。",
    ),
    "steps": ("scheduler_steps_total", "调度器前向的步数，prefill 和 decode 都算。"),
    "gpu_wait_s": (
        "scheduler_gpu_wait_seconds_total",
        "重叠调度时主机等 GPU 算完一步的总秒数：除以步数，每步等得多是 GPU 忙，几乎不等是主机慢。",
    ),
    # << ch19
}


@dataclass
class Metrics:
    """API Server 这一侧的全部指标。只在事件循环里读写，不需要锁。"""

    scheduler: SchedulerStats | None = None  # 调度器最近一次报来的账目
    in_flight: int = 0  # 已经收到、还没结束的 HTTP 生成请求
    prompt_tokens: int = 0
    generation_tokens: int = 0
    finished: Counter[str] = field(default_factory=Counter)  # 按结束原因计数
    rejected: Counter[int] = field(default_factory=Counter)  # 按 HTTP 状态码计数的失败请求
    latency: Histogram = field(default_factory=Histogram)  # 收到请求 → 最后一个 token
    ttft: Histogram = field(default_factory=Histogram)  # 收到请求 → 第一段回复

    def record_finish(self, reason: str, prompt: int, completion: int, seconds: float) -> None:
        self.finished[reason] += 1
        self.prompt_tokens += prompt
        self.generation_tokens += completion
        self.latency.observe(seconds)

    def render(self) -> str:
        """全部指标，Prometheus 文本格式（以换行结尾）。"""
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, samples: list[str]) -> None:
            out.append(f"# HELP {PREFIX}{name} {help_text}")
            out.append(f"# TYPE {PREFIX}{name} {kind}")
            out.extend(samples)

        def one(name: str, kind: str, help_text: str, value: float) -> None:
            metric(name, kind, help_text, [f"{PREFIX}{name} {value}"])

        if self.scheduler is not None:  # 调度器还没报过账时不编造数字
            for f in fields(self.scheduler):
                name, help_text = _SCHEDULER_METRICS[f.name]
                kind = "counter" if name.endswith("_total") else "gauge"
                one(name, kind, help_text, getattr(self.scheduler, f.name))
            s = self.scheduler
            used = s.kv_pages_total - s.kv_pages_free - s.kv_pages_cached
            one("kv_pages_used", "gauge", "正在使用的页：运行中的请求和它们锁住的前缀缓存。", used)
        one("http_requests_in_flight", "gauge", "正在处理的生成请求数。", self.in_flight)
        one("prompt_tokens_total", "counter", "所有请求的提示 token 数之和。", self.prompt_tokens)
        one(
            "generation_tokens_total",
            "counter",
            "所有请求生成的 token 数之和。",
            self.generation_tokens,
        )
        reasons = sorted(self.finished.items())
        metric(
            "requests_finished_total",
            "counter",
            "结束的请求数，按结束原因（stop、length、abort）。",
            [f'{PREFIX}requests_finished_total{{reason="{r}"}} {n}' for r, n in reasons],
        )
        codes = sorted(self.rejected.items())
        metric(
            "requests_rejected_total",
            "counter",
            "没有开始生成就被拒绝的请求数，按 HTTP 状态码。",
            [f'{PREFIX}requests_rejected_total{{code="{c}"}} {n}' for c, n in codes],
        )
        metric(
            "request_latency_seconds",
            "histogram",
            "从收到请求到生成结束的秒数。",
            self.latency.lines(f"{PREFIX}request_latency_seconds"),
        )
        metric(
            "time_to_first_token_seconds",
            "histogram",
            "从收到请求到第一段回复的秒数。",
            self.ttft.lines(f"{PREFIX}time_to_first_token_seconds"),
        )
        return "\n".join(out) + "\n"
