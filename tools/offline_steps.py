"""离线负载一步一步地记：时间花在哪些批大小的步上，每一段离屋顶线多远（第 19 章"离目标还差多少"）。

基准测试的离线一行只给整个负载的用时和下限。这里用同一个预设、同样的引擎，预热一遍，再跑一遍
同样长短的负载，给调度器的每一次前向（``Scheduler.forward``）记下：prefill 还是 decode、几个请求、
几个新 token、要读多少个 token 的 KV，以及从这一次前向开始到下一次前向开始的墙钟时间——重叠调度
时，这就是这一步在流水线上占的时间。每一步的下限和基准测试同一套算法（``roofline``）：decode 是
``step_floor``，prefill 是 ``prefill_floor``。按批大小分段加起来::

    python tools/offline_steps.py --out /tmp/steps.json      # GPU 上：full 预设

前两步 decode 常常特别长：prefill 的几块是异步发出去的，GPU 还没算完，等它的时间落在了后面。
``--check`` 用 quick 预设（内嵌的小模型）在 CPU 上把流程走一遍，量出的数没有意义。
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from minisgl.benchmark import offline, roofline, save_results
from minisgl.benchmark.__main__ import PRESETS, make_llm, offline_workload
from minisgl.benchmark.report import make_meta
from minisgl.core import Batch
from minisgl.models import ModelConfig
from minisgl.utils import dtype_from_str, pick_device

# decode 按批大小分段：每段是 (上一个边界, 这个边界]
BATCH_EDGES = (1, 8, 32, 64, 128, 192, 256)
Forward = tuple[float, str, int, int, int]  # 开始的时刻、阶段、请求数、新 token 数、KV 的 token 数


def bucket(phase: str, batch_size: int) -> str:
    if phase == "prefill":
        return "prefill"
    edge = next((e for e in BATCH_EDGES if batch_size <= e), None)
    return f"decode ≤{edge}" if edge is not None else f"decode >{BATCH_EDGES[-1]}"


def record_forwards(scheduler: Any, rows: list[Forward]) -> Callable[[], None]:
    """给 ``scheduler`` 的每一次前向记一行（开始的时刻、阶段、请求数、新 token 数、这一步之后
    KV 池里这几个请求的 token 数）；返回的函数把原来的 ``forward`` 换回来。"""
    forward = scheduler.forward

    def recorded(batch: Batch) -> Any:
        kv = sum(r.device_len for r in batch.reqs)
        rows.append((time.perf_counter(), batch.phase, batch.size, batch.num_tokens, kv))
        return forward(batch)

    scheduler.forward = recorded  # 实例属性盖住方法
    return lambda: delattr(scheduler, "forward")


def run(preset: str, argv: list[str]) -> dict[str, Any]:
    """``argv`` 只用来在结果里记下这条命令。"""
    p = PRESETS[preset]
    device = pick_device()
    dtype = dtype_from_str(p.dtype)
    work = offline_workload(p)
    llm = make_llm(p, p.model, device)
    rows: list[Forward] = []
    try:
        # 预热一遍，再量一遍；两遍各换一批 token（和基准测试一样），前缀缓存帮不上忙
        offline._generate_once(llm, work.with_fresh_tokens(1))
        restore = record_forwards(llm.scheduler, rows)
        try:
            start = time.perf_counter()
            seconds = offline.timed(
                device, lambda: offline._generate_once(llm, work.with_fresh_tokens(2))
            )
        finally:
            restore()
    finally:
        llm.shutdown()
    end = start + seconds
    roof = roofline.measure_roof(device, dtype, p.big_roof)
    cost = roofline.ModelCost.of(ModelConfig.from_pretrained(p.model), dtype)
    steps = []
    for i, (at, phase, size, tokens, kv) in enumerate(rows):
        until = rows[i + 1][0] if i + 1 < len(rows) else end
        if phase == "prefill":
            floor = roofline.prefill_floor(cost, roof, size, tokens)
        else:
            floor = roofline.step_floor(cost, roof, size, kv)
        steps.append({"phase": phase, "batch_size": size, "new_tokens": tokens, "kv_tokens": kv,
                      "seconds": until - at, "floor_s": floor})  # fmt: skip
    names = ["prefill", *(bucket("decode", e) for e in BATCH_EDGES), bucket("decode", 1 << 30)]
    buckets = {name: {"steps": 0, "seconds": 0.0, "floor_s": 0.0} for name in names}
    for s in steps:
        b = buckets[bucket(s["phase"], s["batch_size"])]
        b["steps"] += 1
        b["seconds"] += s["seconds"]
        b["floor_s"] += s["floor_s"]
    buckets = {name: b for name, b in buckets.items() if b["steps"]}  # 按上面的顺序，去掉空的
    meta = make_meta(device, [])
    meta["command"] = " ".join(["python tools/offline_steps.py", *argv])
    return {
        "meta": meta,
        "model": p.model,
        "workload": work.describe(),
        "roof": vars(roof),
        "wall_s": seconds,
        "before_first_step_s": rows[0][0] - start if rows else seconds,
        "workload_floor_s": roofline.workload_floor(
            cost, roof, work, max(p.requests, *p.decode_batches)
        ),
        "buckets": buckets,
        "steps": steps,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"用时 {result['wall_s']:.3f} 秒，下限 {result['workload_floor_s']:.3f} 秒，"
        f"{len(result['steps'])} 次前向",
        "| 哪些步 | 步数 | 用时（秒） | 下限（秒） | 用时 / 下限 | 每步（毫秒） |",
        "|---|---|---|---|---|---|",
    ]
    for name, b in result["buckets"].items():
        ratio = b["seconds"] / b["floor_s"] if b["floor_s"] else float("nan")
        lines.append(
            f"| {name} | {b['steps']} | {b['seconds']:.3f} | {b['floor_s']:.3f} | {ratio:.2f} | "
            f"{1000 * b['seconds'] / b['steps']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="quick 预设，只走一遍流程")
    ap.add_argument("--out", help="结果写到这个 JSON 文件")
    args = sys.argv[1:] if argv is None else argv
    ns = ap.parse_args(args)
    result = run("quick" if ns.check else "full", args)
    if ns.out:
        save_results(result, ns.out)
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
