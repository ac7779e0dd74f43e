"""``python -m minisgl.benchmark.profile``：剖析一次 prefill 和两段 decode，看时间花在哪些
kernel 上、GPU 空着的时间有多少。

每一段都先在同样的形状上预热（CUDA Graph、Triton 的编译不算在内），再用 ``torch.profiler`` 录一次：

- **设备上的 kernel**：按名字合并，给出调用次数和总时长，最耗时的排在前面；
- **忙与闲**：kernel 时间区间的并集是"GPU 忙"的时间，墙上时间减去它就是 GPU 空等主机的时间
  （准备批次、Python 的开销、同步）；
- **GPU 空着的几段**：录的时候调度器的几个函数（``HOST_STEPS``）各包一层 ``record_function``，
  kernel 之间不短于 1 毫秒的空隙逐段列出来，连同这段时间里主机在哪几个函数里；
- **主机这一侧**：同样的形状再跑一次（换一批 token，不开 profiler），给同样那几个函数包上计时器，
  记下每个函数调用了几次、一共多少毫秒——GPU 空着时主机在忙什么，看这一项。

没有 GPU 时录的是 CPU 上 ``aten::…`` 算子各自的时间（不含子算子），流程一样，用来测试这个脚本本身。
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from minisgl.core import SamplingParams
from minisgl.engine import Engine, has_weight_files
from minisgl.kvcache import RadixPrefixCache
from minisgl.llm import LLM
from minisgl.scheduler import Scheduler
from minisgl.scheduler.cache import CacheManager
from minisgl.utils import dtype_from_str, pick_device, synchronize

from .offline import make_workload
from .report import save_results

__all__ = ["HOST_STEPS", "busy_time_us", "host_timers", "idle_gaps", "profile_region", "run"]

# 主机这一侧计时的函数：调度器一步的三段，前向里的引擎，和 KV 页的几项账目
HOST_STEPS: tuple[tuple[type, str], ...] = (
    (Scheduler, "schedule_next_batch"), (Scheduler, "forward"), (Scheduler, "process"),
    (Engine, "forward_batch"), (CacheManager, "allocate"), (CacheManager, "flush_writes"),
    (CacheManager, "cache_req"), (RadixPrefixCache, "evict"),
)  # fmt: skip


def busy_time_us(intervals: list[tuple[float, float]]) -> float:
    """时间区间（微秒）并集的总长：两个 kernel 在不同的流上重叠时，重叠的部分只算一次。"""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def idle_gaps(
    kernels: list[tuple[float, float]],
    host: list[tuple[float, float, str]],
    span: tuple[float, float],
    min_us: float,
) -> list[dict[str, Any]]:
    """GPU 空着的几段：在 ``span``（微秒）里、kernel 区间的并集之外、不短于 ``min_us`` 的空隙，
    按先后排（第一个 kernel 之前、最后一个之后的也算）。每一段记下从 ``span`` 起点算起的
    毫秒数、长短，以及 ``host`` 里每个函数和它重叠了多久（嵌套的函数各算各的）。"""
    gaps: list[dict[str, Any]] = []
    end = span[0]
    for start, stop in sorted(kernels) + [(span[1], span[1])]:
        if start - end >= min_us:
            overlap: dict[str, float] = defaultdict(float)
            for h_start, h_stop, name in host:
                both = min(h_stop, start) - max(h_start, end)
                if both > 0:
                    overlap[name] += both / 1000
            gaps.append({
                "start_ms": (end - span[0]) / 1000,
                "ms": (start - end) / 1000,
                "host": dict(sorted(overlap.items(), key=lambda kv: -kv[1])),
            })  # fmt: skip
        end = max(end, stop)
    return gaps


def profile_region(
    device: torch.device,
    fn: Callable[[], Any],
    top: int = 12,
    annotate: tuple[tuple[type, str], ...] = (),
    gap_ms: float = 1.0,
) -> dict[str, Any]:
    """预热过的 ``fn`` 录一次：墙上时间、设备忙的时间、按名字合并的 kernel 排行，以及 GPU 空着
    不短于 ``gap_ms`` 的几段（``idle_gaps``；``annotate`` 里的方法录的时候包一层
    ``record_function``，空隙里主机在哪个函数里就看得见）。"""
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    labels = {f"{cls.__name__}.{name}" for cls, name in annotate}
    synchronize(device)
    with _wrapped(annotate, _annotated), profile(activities=activities) as prof:
        start = time.perf_counter()
        fn()
        synchronize(device)
        wall_us = (time.perf_counter() - start) * 1e6
    calls: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    intervals: list[tuple[float, float]] = []
    host: list[tuple[float, float, str]] = []
    cpu_busy = 0.0
    events = prof.events()
    on_cpu = [e.time_range for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    # 录到的范围：主机上第一件事开始到最后一件事结束（第一个 kernel 之前主机在准备批次）
    span = (min((r.start for r in on_cpu), default=0.0), max((r.end for r in on_cpu), default=0.0))
    for event in events:
        if event.name in labels:  # 包上的函数：CPU 上是主机的区间，GPU 上那一份不是 kernel
            if event.device_type == torch.autograd.DeviceType.CPU:
                host.append((event.time_range.start, event.time_range.end, event.name))
            continue
        if cuda and event.device_type == torch.autograd.DeviceType.CUDA:
            start_us, end_us = event.time_range.start, event.time_range.end
            intervals.append((start_us, end_us))
            spent = end_us - start_us
        elif not cuda and event.name.startswith("aten::"):
            spent = event.self_cpu_time_total  # 外层算子的时间里含着里层的：只算自己的
            cpu_busy += spent
        else:
            continue
        calls[event.name] += 1
        total[event.name] += spent
    busy = busy_time_us(intervals) if cuda else cpu_busy
    ranked = sorted(total, key=total.__getitem__, reverse=True)
    return {
        "wall_ms": wall_us / 1000,
        "busy_ms": busy / 1000,
        "idle_ms": max(wall_us - busy, 0.0) / 1000,
        "launches": sum(calls.values()),
        "kernels": [
            {"name": name[:120], "calls": calls[name], "total_ms": total[name] / 1000}
            for name in ranked[:top]
        ],
        "gaps": idle_gaps(intervals, host, span, gap_ms * 1000) if cuda else [],
    }


@contextmanager
def _wrapped(
    targets: tuple[tuple[type, str], ...],
    wrap: Callable[[Callable[..., Any], str], Callable[..., Any]],
) -> Iterator[None]:
    """``with`` 块里把 ``targets`` 的每个方法换成 ``wrap(原方法, "类.方法")``，退出时换回来。"""
    originals = [(cls, name, cls.__dict__[name]) for cls, name in targets]
    for cls, name, real in originals:
        setattr(cls, name, wrap(real, f"{cls.__name__}.{name}"))
    try:
        yield
    finally:
        for cls, name, real in originals:
            setattr(cls, name, real)


def _annotated(real: Callable[..., Any], label: str) -> Callable[..., Any]:
    """包一层 ``record_function``：profiler 的时间线上看得见这个方法从哪儿到哪儿。"""

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with record_function(label):
            return real(*args, **kwargs)

    return wrapper


@contextmanager
def host_timers(
    targets: tuple[tuple[type, str], ...] = HOST_STEPS,
) -> Iterator[dict[str, dict[str, float]]]:
    """``with`` 块里给 ``targets`` 的每个方法包一层计时，产出
    ``{"类.方法": {"calls": 次数, "total_ms": 毫秒}}``，退出时换回原来的方法。torch.profiler
    在 CPU 这一侧记每一个算子，自己就很费时间；这里每次调用只多两次 ``perf_counter``。
    嵌套的调用各记各的（``forward`` 的时间里含着 ``forward_batch``）。"""
    stats = {f"{cls.__name__}.{name}": {"calls": 0, "total_ms": 0.0} for cls, name in targets}

    def timed(real: Callable[..., Any], label: str) -> Callable[..., Any]:
        entry = stats[label]

        @functools.wraps(real)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                entry["calls"] += 1
                entry["total_ms"] += (time.perf_counter() - start) * 1000

        return wrapper

    with _wrapped(targets, timed):
        yield stats


def run(model: str, dtype: str, prompt_len: int, prefill_batch: int, decode: tuple[int, ...],
        decode_steps: int, max_extend_tokens: int) -> dict[str, Any]:  # fmt: skip
    device = pick_device()
    rows, max_seq_len = max(prefill_batch, *decode), prompt_len + decode_steps + 8
    # KV 池正好开页表的格子数：剖析的负载放得下就够了，也不随别的进程占着多少显存变（测试在一块
    # GPU 上并行跑时，按显存的比例算可能一页也开不出来；见基准测试预设的 kv_fits_table）
    llm = LLM(
        model, device=device, dtype=dtype_from_str(dtype),
        dummy_weights=not has_weight_files(model), max_running_reqs=rows,
        max_seq_len=max_seq_len, num_pages=rows * max_seq_len, max_extend_tokens=max_extend_tokens,
    )  # fmt: skip

    def generate(batch: int, tokens: int, seed: int) -> Callable[[], Any]:
        work = make_workload(batch, (prompt_len, prompt_len), (tokens, tokens), seed=seed)
        params = [SamplingParams(max_tokens=tokens, ignore_eos=True)] * batch
        return lambda: llm.generate(work.prompts, params)

    regions: dict[str, Any] = {}
    cases = [(f"prefill {prefill_batch}×{prompt_len}", prefill_batch, 1)]
    cases += [(f"decode bs{bs}×{decode_steps}", bs, 1 + decode_steps) for bs in decode]
    for i, (name, batch, tokens) in enumerate(cases):
        generate(batch, tokens, seed=100 + i)()  # 预热：同样的形状，另一批 token
        regions[name] = r = profile_region(
            device, generate(batch, tokens, seed=200 + i), annotate=HOST_STEPS
        )
        again = generate(batch, tokens, seed=300 + i)  # 先造好负载：随机生成提示不算进墙上时间
        with host_timers() as host:
            start = time.perf_counter()
            again()
            synchronize(device)
            r["host_wall_ms"] = (time.perf_counter() - start) * 1000
        r["host"] = host
        print(f"[profile] {name}：墙上 {r['wall_ms']:.1f} ms，设备忙 {r['busy_ms']:.1f} ms，"
              f"{r['launches']} 次启动")  # fmt: skip
    llm.shutdown()
    return {"device": str(device), "model": model, "dtype": dtype, "regions": regions}


def render(result: dict[str, Any]) -> str:
    lines = [f"设备 {result['device']}，模型 {result['model']}（{result['dtype']}）"]
    for name, r in result["regions"].items():
        lines.append(
            f"\n## {name}：墙上 {r['wall_ms']:.1f} ms，设备忙 {r['busy_ms']:.1f} ms，"
            f"空闲 {r['idle_ms']:.1f} ms，{r['launches']} 次启动\n"
        )
        lines.append("| kernel | 次数 | 总时长 ms |")
        lines.append("|---|---:|---:|")
        lines += [
            f"| `{k['name'][:80]}` | {k['calls']} | {k['total_ms']:.2f} |" for k in r["kernels"]
        ]
        if r.get("gaps"):  # 早先的 JSON 没有这一项
            lines.append("\nGPU 空着不短于 1 毫秒的几段（主机在哪些函数里，毫秒）：\n")
            lines.append("| 起点 ms | 空着 ms | 主机 |")
            lines.append("|---:|---:|---|")
            lines += [
                f"| {g['start_ms']:.1f} | {g['ms']:.1f} | "
                + ("、".join(f"`{name}` {ms:.1f}" for name, ms in g["host"].items()) or "—")
                + " |"
                for g in r["gaps"]
            ]
        if "host" in r:  # 早先的 JSON 没有这一项
            wall = r["host_wall_ms"]
            lines.append(f"\n主机这一侧（不开 profiler 再跑一次，墙上 {wall:.1f} ms）：\n")
            lines.append("| 函数 | 次数 | 总时长 ms |")
            lines.append("|---|---:|---:|")
            lines += [
                f"| `{name}` | {h['calls']} | {h['total_ms']:.2f} |"
                for name, h in sorted(r["host"].items(), key=lambda kv: -kv[1]["total_ms"])
            ]
    return "\n".join(lines)


PRESETS = {
    # 最后一项是 max_extend_tokens，和基准测试的预设一样
    "full": ("models/qwen3-0.6b-shape", "bfloat16", 512, 64, (1, 64, 256), 128, 16384),
    "quick": ("models/tiny-qwen3", "float32", 32, 4, (1, 4), 8, 8192),
    # 在线 8 个客户端的形状：151 个 token 的提示，batch 1 和 batch 8 的 decode 对着看
    "batch8": ("models/qwen3-0.6b-shape", "bfloat16", 151, 8, (1, 8), 128, 16384),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minisgl.benchmark.profile", description=__doc__)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    ap.add_argument("--out", help="结果写到这个 JSON 文件")
    ns = ap.parse_args(argv)
    result = run(*PRESETS[ns.preset])
    print(render(result))
    if ns.out:
        save_results(result, ns.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
