"""第 19 章：基准测试的各个部件，以及这一章修掉的主机开销。

- 负载：同一个种子同一批请求，长度都在区间里；
- decode 补页：``ensure_decode_pages`` 和逐个 ``ensure_pages`` 分到同样的页、写出同样的页表，
  而且整批只分配一次、只拷一次（行、列、槽位拼在一起），不随批大小增长；
- 屋顶线的下限：手算的小例子；百分位数和 torch.quantile 一致；
- RMSNorm（可带残差）和 RoPE 的 Triton 版与 ``ops.py`` 的 PyTorch 写法一致：二维、三维的跨步视图、
  原地写回；不在 CUDA 上时由 Triton 的解释器执行，在 GPU 上（和包里一样挑设备）再测 bfloat16；
- 重复测量：先预热一次（不记），再量 N 次，报告中位数、最小、最大值（假的测量，不计时）；
- decode 一步直接计时：本书的引擎（驱动调度器，重叠调度开、关）和 transformers（streamer）都恰好
  量出 ``steps`` 步；换成只在前向时走的假时钟（prefill 一次 1000 秒、decode 一次 1 秒），每一步
  都是 1 秒：prefill 不在任何一步里；
- 报告：早先只量一次的 JSON 和现在带统计的 JSON 都排得成表，SVG 是合法的 XML，同一个 JSON
  画出同一张图；
- 端到端：``python -m minisgl.benchmark --preset quick`` 跑完四项，JSON 里的数自洽：每一行都量了
  预设的次数，两种 transformers 都在（或者记下了错误），对话接口带、不带 max_tokens 的客户端都
  恰好读了要求的 token 数。
"""

from __future__ import annotations

import gc
import json
import math
import random
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import torch

from minisgl.benchmark import load_results, make_workload, offline, render_markdown, save_results
from minisgl.benchmark.__main__ import PRESETS
from minisgl.benchmark.offline import (
    HFPeer,
    decode_step_times,
    hf_decode_step_times,
    load_hf,
    repeat,
    summarize,
)
from minisgl.benchmark.online import percentile
from minisgl.benchmark.report import header, render_plots
from minisgl.benchmark.roofline import (
    DeviceRoof,
    ModelCost,
    step_floor,
    tpot_floor,
    workload_floor,
)
from minisgl.core import SamplingParams
from minisgl.engine import has_weight_files
from minisgl.kernel import ops
from minisgl.kvcache import create_prefix_cache
from minisgl.llm import LLM
from minisgl.models import ModelConfig
from minisgl.scheduler.cache import CacheManager
from minisgl.scheduler.utils import SchedReq
from minisgl.utils.device import pick_device

REPO = Path(__file__).resolve().parents[2]
DEVICE = str(pick_device())  # 和包里的选法相同：MINISGL_DEVICE > cuda > mps > cpu
DTYPES = [torch.float32] + ([torch.bfloat16] if DEVICE.startswith("cuda") else [])


def test_workload_is_deterministic_and_in_range() -> None:
    a = make_workload(50, (3, 9), (1, 4), seed=7)
    assert a == make_workload(50, (3, 9), (1, 4), seed=7)
    assert a != make_workload(50, (3, 9), (1, 4), seed=8)
    assert all(3 <= len(p) <= 9 for p in a.prompts) and all(1 <= n <= 4 for n in a.output_lens)
    assert {len(p) for p in a.prompts} == set(range(3, 10))  # 两端都取得到
    assert all(100 <= t < 10000 for p in a.prompts for t in p)
    assert a.describe() == {
        "requests": 50,
        "input_tokens": sum(map(len, a.prompts)),
        "output_tokens": sum(a.output_lens),
    }


def _manager(page_size: int, rows: int = 8, columns: int = 64) -> CacheManager:
    table = torch.full((rows, columns), -1, dtype=torch.int32)
    return CacheManager(256, page_size, table, create_prefix_cache("naive", page_size))


def _requests(rng: random.Random) -> list[SchedReq]:
    reqs = []
    for i in range(8):
        n = rng.randint(1, 40)
        reqs.append(SchedReq(torch.arange(n, dtype=torch.int32), table_idx=i, output_len=8, uid=i))
    return reqs


@pytest.mark.parametrize("page_size", [1, 4])
def test_batched_decode_pages_equal_one_by_one(page_size: int) -> None:
    rng = random.Random(page_size)
    reqs_a, reqs_b = _requests(rng), _requests(random.Random(page_size))
    one, batched = _manager(page_size), _manager(page_size)
    for step in range(6):  # 几步 decode：每步长度加一，跨页的请求补页
        for ra, rb in zip(reqs_a, reqs_b):
            if step:
                ra.append_host(1)
                rb.append_host(1)
        for req in reqs_a:
            one.ensure_pages(req, req.device_len)
        batched.ensure_decode_pages(reqs_b)
        assert [r.pages for r in reqs_a] == [r.pages for r in reqs_b]
        assert torch.equal(one.page_table, batched.page_table)
        assert one.num_free_pages == batched.num_free_pages
    # 每个请求的前 device_len 列都是合法的槽位，互不重复
    slots = [s for r in reqs_b for s in batched.page_table[r.table_idx, : r.device_len].tolist()]
    assert min(slots) >= 0 and len(set(slots)) == len(slots)


def test_decode_pages_take_one_copy_whatever_the_batch(page_table_copies: list[int]) -> None:
    calls = page_table_copies
    manager = _manager(1)
    allocations: list[int] = []
    allocate = manager.allocate
    manager.allocate = lambda n: allocations.append(n) or allocate(n)  # type: ignore[method-assign]
    reqs = _requests(random.Random(0))
    manager.ensure_decode_pages(reqs)  # 8 个请求都要页
    assert calls == [2 * sum(r.device_len for r in reqs)]  # 格子和槽位拼在一起，一次拷完
    assert len(allocations) == 1  # 缺的页一次分配
    calls.clear()
    manager.ensure_decode_pages(reqs)  # 都已经够了：一次也不拷
    assert calls == []


def test_floors_by_hand() -> None:
    config = ModelConfig.from_pretrained(REPO / "models" / "tiny-qwen3")
    cost = ModelCost.of(config, torch.float32)
    table = config.vocab_size * config.hidden_size
    assert cost.head_flops == 2 * table
    kv = 2 * config.num_layers * config.num_kv_heads * config.head_dim * 4
    assert cost.kv_bytes_per_token == kv
    assert cost.weight_bytes > 4 * table  # 绑定的词嵌入只算一次，再加上各层
    assert cost.body_flops == 2 * (cost.weight_bytes // 4 - table)

    slow_memory = DeviceRoof(copy_bytes_per_s=1e6, matmul_flops=1e18)
    want = (cost.weight_bytes + 10 * kv) / 1e6
    assert step_floor(cost, slow_memory, 2, 10) == pytest.approx(want)
    slow_math = DeviceRoof(copy_bytes_per_s=1e18, matmul_flops=1e6)
    assert step_floor(cost, slow_math, 2, 10) == pytest.approx(cost.flops(2, 2) / 1e6)

    # 在线：2 个请求各有 3 个 token 的提示、生成 4 个。TTFT 之后 3 步，每个请求的 KV 是 4、5、6
    want = sum(cost.weight_bytes + 2 * kv_len * kv for kv_len in (4, 5, 6)) / 3 / 1e6
    assert tpot_floor(cost, slow_memory, 2, 3, 4) == pytest.approx(want)
    assert tpot_floor(cost, slow_math, 2, 3, 4) == pytest.approx(cost.flops(2, 2) / 1e6)
    with pytest.raises(ValueError, match="2 output tokens"):
        tpot_floor(cost, slow_memory, 2, 3, 1)  # 只有一个 token：没有 TPOT

    # 一个请求：提示 2 个 token，生成 3 个。prefill 生成第 1 个，之后两步 decode（上下文 3、4）
    one = make_workload(1, (2, 2), (3, 3))
    want = cost.flops(2, 1) / 1e6 + 2 * cost.flops(1, 1) / 1e6
    assert workload_floor(cost, slow_math, one, 8) == pytest.approx(want)
    want = (cost.flops(2, 1) / 1e18) + (2 * cost.weight_bytes + 7 * kv) / 1e6
    assert workload_floor(cost, slow_memory, one, 8) == pytest.approx(want)
    # 一次只能 decode 一个：三个请求依次来，前一个生成完的那一步之后，下一个马上补上
    three = make_workload(3, (2, 2), (3, 3))
    want = (cost.flops(6, 3) / 1e18) + 3 * (2 * cost.weight_bytes + 7 * kv) / 1e6
    assert workload_floor(cost, slow_memory, three, 1) == pytest.approx(want)


def test_percentile_matches_torch() -> None:
    rng = random.Random(0)
    xs = [rng.random() for _ in range(37)]
    for q in (0, 50, 90, 99, 100):
        want = torch.quantile(torch.tensor(xs, dtype=torch.float64), q / 100).item()
        assert percentile(xs, q) == pytest.approx(want)
    with pytest.raises(ValueError):
        percentile([], 50)


SAMPLE: dict[str, Any] = {
    "meta": {"command": "python -m minisgl.benchmark --preset x", "device": "cpu", "torch": "2",
             "python": "3", "date": "2026-01-01"},
    "model": "m",
    "dtype": "bfloat16",
    "roof": {"copy_bytes_per_s": 4e12, "matmul_flops": 7e14},
    "offline": {
        "workload": {"requests": 4, "input_tokens": 40, "output_tokens": 1000},
        "ours": {"seconds": 2.0, "output_tokens": 1000, "tokens_per_s": 500.0},
        "hf": {"seconds": 20.0, "output_tokens": 1000, "tokens_per_s": 50.0},
        "floor_s": 0.5,
    },
    "decode": [
        {"batch_size": 1, "context_len": 8, "ours_ms": 2.0, "floor_ms": 0.5, "hf_ms": 40.0},
        {"batch_size": 8, "context_len": 8, "ours_ms": 3.0, "floor_ms": 0.6, "hf_ms": 45.0},
    ],
    "prefill": {"batch_size": 2, "context_len": 8, "ours_tokens_per_s": 1e4,
                "floor_tokens_per_s": 1e6, "hf_tokens_per_s": 5e3},
    "online": {"max_tokens": 16, "levels": [
        {"clients": 1, "requests": 2, "wall_s": 1, "output_tokens_per_s": 32, "ttft_p50_ms": 5,
         "ttft_p99_ms": 6, "tpot_p50_ms": 1, "tpot_p99_ms": 2, "latency_p50_s": 0.02},
        {"clients": 8, "requests": 16, "wall_s": 1, "output_tokens_per_s": 256, "ttft_p50_ms": 9,
         "ttft_p99_ms": 12, "tpot_p50_ms": 1.5, "tpot_p99_ms": 3, "latency_p50_s": 0.03},
    ]},
}  # fmt: skip


def test_repeat_warms_up_then_reports_the_median() -> None:
    calls: list[int] = []
    fake = {0: 99.0, 1: 3.0, 2: 1.0, 3: 2.0, 4: 10.0}  # 预热那次最慢：不该算进去

    def measure(i: int) -> float:
        calls.append(i)
        return fake[i]

    stats = repeat(measure, 4)
    assert calls == [0, 1, 2, 3, 4]
    assert stats == {"median": 2.5, "min": 1.0, "max": 10.0, "runs": 4,
                     "samples": [3.0, 1.0, 2.0, 10.0]}  # fmt: skip
    warm: list[str] = []
    calls.clear()
    stats = repeat(measure, 1, warmup=lambda: warm.append("x"))  # 自己的预热代替 measure(0)
    assert warm == ["x"] and calls == [1]
    assert stats["median"] == stats["min"] == stats["max"] == 3.0 and stats["runs"] == 1
    with pytest.raises(ValueError):
        repeat(measure, 0)
    with pytest.raises(ValueError):
        summarize([])


def _tiny_llm(model: Path, overlap: bool, **config: Any) -> LLM:
    llm = LLM(model, device=DEVICE, dtype=torch.float32, num_pages=512, max_running_reqs=4,
              max_seq_len=64, **config)  # fmt: skip
    llm.scheduler.overlap = overlap
    return llm


def _ticking_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """计时用的时钟换成一个只在前向时走的假时钟（返回它的读数，由调用方拨）：量出的每一步是
    哪几次前向一目了然。"""
    now = [0.0]
    monkeypatch.setattr(offline.time, "perf_counter", lambda: now[0])
    return now


@pytest.mark.parametrize("overlap", [False, True])
def test_decode_step_times_one_per_full_batch_decode(tiny_model: Path, overlap: bool) -> None:
    """prefill 分成几步（``max_extend_tokens`` 很小，还有分块）：量出的恰好是整批 decode 的那
    ``steps`` 步，调度器也恰好 decode 了这么多步（重叠调度没有多发一步）。"""
    llm = _tiny_llm(tiny_model, overlap, max_extend_tokens=16)
    prompts = make_workload(4, (9, 9), (1, 1), seed=5).prompts
    before = dict(llm.scheduler.stats)
    seconds = decode_step_times(llm, prompts, 5)
    assert len(seconds) == 5 and all(s > 0 for s in seconds)
    stats = llm.scheduler.stats
    assert stats["decode_steps"] - before["decode_steps"] == 5
    assert stats["prefill_steps"] - before["prefill_steps"] >= 3  # 36 个提示 token，每步至多 16
    llm.shutdown()


def test_decode_step_times_leave_out_prefill(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """不重叠时每次 ``step()`` 恰好做一次前向：假时钟下整批 decode 的每一步都是 1 秒。"""
    llm = _tiny_llm(tiny_model, overlap=False)
    now = _ticking_clock(monkeypatch)
    forward = llm.scheduler.forward

    def ticking(batch: Any) -> Any:
        now[0] += 1000.0 if batch.is_prefill else 1.0
        return forward(batch)

    monkeypatch.setattr(llm.scheduler, "forward", ticking)
    prompts = make_workload(4, (9, 9), (1, 1), seed=6).prompts
    assert decode_step_times(llm, prompts, 5) == [1.0] * 5
    llm.shutdown()


def test_hf_decode_step_times_leave_out_prefill(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = load_hf(str(tiny_model), torch.device(DEVICE), torch.float32,
                    dummy=not has_weight_files(tiny_model))  # fmt: skip
    peer = HFPeer(model)
    prompts = make_workload(3, (7, 7), (1, 1), seed=4).prompts
    seconds = hf_decode_step_times(peer, prompts, 4)
    assert len(seconds) == 4 and all(s > 0 for s in seconds)
    now = _ticking_clock(monkeypatch)
    calls: list[int] = []
    forward = model.forward

    def ticking(*args: Any, **kwargs: Any) -> Any:  # 第一次前向是 prefill
        now[0] += 1.0 if calls else 1000.0
        calls.append(1)
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", ticking)
    assert hf_decode_step_times(peer, prompts, 4) == [1.0] * 4
    assert len(calls) == 5  # prefill 一次，decode 四次


def test_prefill_samples_carry_their_notes(tiny_model: Path) -> None:
    """prefill 的每一次都带着 ``sample_notes``：这一次调度器走了几步（只 prefill，生成 1 个 token
    不 decode）、垃圾回收、分配器重试。``with`` 块里手动回收一次，计数就看得到它。"""
    llm = _tiny_llm(tiny_model, overlap=True, max_extend_tokens=16)
    result = offline.prefill_throughput(llm, 2, 12, runs=3)
    assert len(result["notes"]) == 3  # 预热那次不算
    for note in result["notes"]:
        assert note["steps"] == {"prefill_steps": 2, "decode_steps": 0, "retracted": 0}
        assert note["alloc_retries"] == 0 and note["gc_longest_ms"] >= 0
        assert 0 < note["longest_step_ms"] <= note["in_steps_ms"] <= note["wall_ms"]
        assert isinstance(note["triton_compiles"], int) and note["triton_compiles"] >= 0
    with offline.sample_notes(llm) as note:
        gc.collect()
        time.sleep(0.05)  # 不在任何一步里：全算在步外
    assert note["gc_pauses"] >= 1 and note["gc_longest_ms"] > 0
    assert note["in_steps_ms"] == 0 and note["wall_ms"] >= 50
    assert "step" not in vars(llm.scheduler)  # 计时的包装已经撤掉
    llm.shutdown()


def test_notes_count_triton_compiles(tiny_model: Path) -> None:
    """Triton 每编译一个 kernel 调用一次编译钩子：``with`` 块里调用两次，记下的就是 2，连同 Triton
    给的说明（``repr``，没有时用 ``key``）；原来的钩子照样被调用，块结束时换回来。"""
    from triton import knobs

    seen: list[str] = []
    original = knobs.runtime.jit_post_compile_hook
    knobs.runtime.jit_post_compile_hook = lambda **kw: seen.append(kw["key"])
    try:
        llm = _tiny_llm(tiny_model, overlap=False)
        compiled_at_start = len(seen)  # GPU 上建引擎时真编译的 kernel 也经过这个钩子
        with offline.sample_notes(llm) as note:
            knobs.runtime.jit_post_compile_hook(key="a", repr="_k[num_warps=4](n: i32D)")
            knobs.runtime.jit_post_compile_hook(key="b")
        llm.shutdown()
        assert note["triton_compiles"] == 2 and seen[compiled_at_start:] == ["a", "b"]
        assert note["triton_kernels"] == ["_k[num_warps=4](n: i32D)", "b"]
        assert knobs.runtime.jit_post_compile_hook is not None
        knobs.runtime.jit_post_compile_hook(key="c")  # 已经换回原来的钩子：不再计数
        assert note["triton_compiles"] == 2 and seen[compiled_at_start:] == ["a", "b", "c"]
    finally:
        knobs.runtime.jit_post_compile_hook = original


def test_compile_watchers_share_one_hook_and_put_the_original_back() -> None:
    """几个观察者共用一个钩子，每个都收到 Triton 的说明（``repr``，没有时用 ``key``），原来的
    钩子照样被调用；按任意顺序取消，最后一个取消时换回原来的钩子，重复取消什么也不做。"""
    from triton import knobs

    from minisgl.kernel.compiles import watch_triton_compiles

    seen: list[str] = []
    original = knobs.runtime.jit_post_compile_hook
    knobs.runtime.jit_post_compile_hook = mine = lambda **kw: seen.append(kw["key"])
    try:
        a: list[str] = []
        b: list[str] = []
        stop_a, stop_b = watch_triton_compiles(a.append), watch_triton_compiles(b.append)
        assert stop_a is not None and stop_b is not None
        knobs.runtime.jit_post_compile_hook(key="k1", repr="_k[num_warps=4](n: i32D)")
        assert a == b == ["_k[num_warps=4](n: i32D)"] and seen == ["k1"]
        stop_a()  # 先装的先取消：b 照样收到
        knobs.runtime.jit_post_compile_hook(key="k2")
        assert a == ["_k[num_warps=4](n: i32D)"] and b[-1] == "k2" and seen == ["k1", "k2"]
        stop_b()
        assert knobs.runtime.jit_post_compile_hook is mine
        stop_b()
        assert knobs.runtime.jit_post_compile_hook is mine
    finally:
        knobs.runtime.jit_post_compile_hook = original


def test_scheduler_counts_compiles_and_reports_them(
    tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """调度器数 Triton 新编译的 kernel，随账目报给 API Server，``/metrics`` 里是一个 counter；
    日志里一行警告写明是哪个，基准测试从服务的日志里按它找出来；调度器关掉以后不再数，钩子换回
    原来的。"""
    from triton import knobs

    from minisgl.benchmark.online import compiled_kernels
    from minisgl.message import SchedulerStats
    from minisgl.scheduler.stats import snapshot
    from minisgl.server.metrics import Metrics

    original = knobs.runtime.jit_post_compile_hook
    llm = _tiny_llm(tiny_model, overlap=False)
    capsys.readouterr()
    knobs.runtime.jit_post_compile_hook(key="x", repr="_k[num_warps=4](n: i32)")
    assert llm.scheduler.stats["triton_compiles"] == 1
    assert compiled_kernels(capsys.readouterr().out) == ["_k[num_warps=4]"]
    stats = snapshot(llm.scheduler)
    assert isinstance(stats, SchedulerStats) and stats.triton_compiles == 1
    llm.shutdown()
    assert knobs.runtime.jit_post_compile_hook is original
    m = Metrics()
    m.scheduler = stats
    lines = m.render().splitlines()
    assert "# TYPE minisgl_triton_compiles_total counter" in lines
    assert "minisgl_triton_compiles_total 1" in lines


def test_scheduler_counts_time_waiting_for_the_device(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """重叠调度时，处理一步的结果之前要等那一步的 token 拷回主机：等的时间记进账目
    （``gpu_wait_us``），``/metrics`` 里是秒数的 counter，连同前向的步数。CPU 上的事件不用等，
    这里让每次等待多等 2 毫秒：每处理一步都记下了至少 2 毫秒，处理的正是走过的每一步。"""
    from minisgl.scheduler import scheduler as scheduler_module
    from minisgl.scheduler.stats import snapshot
    from minisgl.server.metrics import Metrics

    waits: list[int] = []
    new_event = scheduler_module.new_event

    class SlowEvent:  # 照常等真的事件（GPU 上拷贝要真的完成），再多等 2 毫秒
        def __init__(self, device: Any) -> None:
            self.event = new_event(device)

        def record(self) -> None:
            self.event.record()

        def synchronize(self) -> None:
            self.event.synchronize()
            waits.append(1)
            time.sleep(0.002)

    monkeypatch.setattr(scheduler_module, "new_event", SlowEvent)
    llm = _tiny_llm(tiny_model, overlap=True)
    stats = llm.scheduler.stats
    assert stats["gpu_wait_us"] == 0
    prompts = make_workload(3, (9, 9), (6, 6), seed=7).prompts
    llm.generate(prompts, SamplingParams(max_tokens=6, ignore_eos=True))
    steps = stats["prefill_steps"] + stats["decode_steps"]
    assert len(waits) == steps >= 6 and stats["gpu_wait_us"] >= 2000 * steps
    report = snapshot(llm.scheduler)
    assert report.steps == steps and report.gpu_wait_s == stats["gpu_wait_us"] / 1e6
    llm.shutdown()
    m = Metrics()
    m.scheduler = report
    lines = m.render().splitlines()
    assert "# TYPE minisgl_scheduler_gpu_wait_seconds_total counter" in lines
    assert f"minisgl_scheduler_gpu_wait_seconds_total {report.gpu_wait_s}" in lines
    assert f"minisgl_scheduler_steps_total {steps}" in lines


def test_report_names_the_slow_samples() -> None:
    """比中位数慢一倍以上的那几次，报告里列出它们的记录，再附上最快的一次。"""
    quiet = {"steps": {"prefill_steps": 2}, "gc_pauses": 0, "gc_longest_ms": 0.0,
             "alloc_retries": 0, "wall_ms": 90.0, "in_steps_ms": 85.0,
             "longest_step_ms": 50.0}  # fmt: skip
    loud = {**quiet, "gc_pauses": 3, "gc_longest_ms": 412.5, "wall_ms": 600.0,
            "triton_compiles": 2, "triton_kernels": ["_a[num_warps=4](n: i32D)", "_b"]}  # fmt: skip
    stats = summarize([390e3, 64e3, 386e3])
    stats["notes"] = [quiet, loud, quiet]
    r = {**SAMPLE, "prefill": {**SAMPLE["prefill"], "ours_tokens_per_s": stats}}
    text = render_markdown(r)
    assert "第 2 次只有 64,000：prefill 2 步" in text
    assert "垃圾回收 3 次（最长 412.5 毫秒）" in text and "最快的第 1 次" in text
    assert "共 600.0 毫秒，在步里 85.0（最长的一步 50.0），步外 515.0；Triton 新编译 2 个" in text
    assert "kernel（`_a[num_warps=4](n: i32D)`；`_b`）" in text
    assert text.count("Triton 新编译") == 1  # 没有这一项的记录（早先的结果）不写
    assert "只有" not in render_markdown(r, slow_notes=False)
    stats["samples"] = [390e3, 380e3, 386e3]
    assert "只有" not in render_markdown(r)


def test_report_tables_and_plots(tmp_path: Path) -> None:
    """早先的 JSON：每项只有一个数、只有一种 transformers（提交的 results.h200.json 就是这样）。"""
    path = tmp_path / "r.json"
    save_results(SAMPLE, path)
    results = load_results(path)
    assert results == SAMPLE
    text = render_markdown(results)
    assert "| mini-sglang（本书） | 2.0 | 500 | — | 25 % |" in text
    assert "| transformers generate | 20.0 | 50 | 10.0× | 2 % |" in text
    assert "| 屋顶线下限 | 0.5 | 2,000 | — | 100 % |" in text
    assert "**10.0 倍**" in text
    assert "| 8 | 3.00 | 45.00 | 15.0× | 0.600 | 20 % |" in text
    assert "| transformers generate | 5,000 | 2.0× | 0 % |" in text
    assert "| 8 | 16 | 9.0 / 12.0 | 1.50 / 3.00 | 0.030 | 256 |" in text
    assert "8 个客户端的 TPOT p50 是 1 个客户端的 **1.50 倍**。" in text  # 没有下限：不提
    assert "TPOT 下限" not in text and "等 GPU" not in text
    assert "4,000 GB/s" in text and "700.0 TFLOP/s" in text
    svg = render_plots(results)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert svg == render_plots(results)  # 同一个 JSON，同一张图（构建结果可以比较）
    with pytest.raises(ValueError, match="missing"):
        bad = tmp_path / "bad.json"
        bad.write_text("{}")
        load_results(bad)


def test_report_online_floors() -> None:
    """在线每一档带着 TPOT 的下限时，表里多一栏，8 和 1 个客户端的比值旁边给出下限之比。"""
    r = json.loads(json.dumps(SAMPLE))
    for level, floor in zip(r["online"]["levels"], (0.5, 0.55)):
        level.update(tpot_floor_ms=floor, prompt_tokens=151.0)
    text = render_markdown(r)
    assert "| TPOT p50 / p99（毫秒） | TPOT 下限（毫秒） | 单个请求用时 p50（秒） |" in text
    assert "| 8 | 16 | 9.0 / 12.0 | 1.50 / 3.00 | 0.550 | 0.030 | 256 |" in text
    assert "**1.50 倍**（下限之比 1.10 倍，每个请求的提示 151 个 token）。" in text


def test_report_online_gpu_wait() -> None:
    """在线每一档带着调度器每步等 GPU 的毫秒数时，表里多一栏；那一轮一步也没走（None）写"—"。
    早先的结果没有这一项：不列这一栏（上一个测试）。"""
    r = json.loads(json.dumps(SAMPLE))
    for level, wait in zip(r["online"]["levels"], (0.412, None)):
        level["gpu_wait_ms_per_step"] = wait
    text = render_markdown(r)
    assert "| TPOT p50 / p99（毫秒） | 调度器每步等 GPU（毫秒） | 单个请求用时 p50（秒） |" in text
    assert "| 8 | 16 | 9.0 / 12.0 | 1.50 / 3.00 | — | 0.030 | 256 |" in text
    assert "| 0.412 |" in text


def _stats(*samples: float) -> dict[str, Any]:
    return summarize(samples)


def test_report_with_spread_and_two_peers() -> None:
    """现在的 JSON：每项是几次测量的统计；编译的那种出错时记下错误，出错之前量完的照常显示。"""
    r = json.loads(json.dumps(SAMPLE))
    r["settings"] = {"runs": 3, "hf_offline_runs": 1, "decode_steps": 8, "hf_decode_steps": 4,
                     "max_extend_tokens": 16384}  # fmt: skip
    r["peers"] = {
        "hf": {"label": "x"},
        "hf_compiled": {"label": "y", "error": "RuntimeError: boom"},
    }
    off = r["offline"]
    off["ours"] = {"output_tokens": 1000, "seconds": _stats(1.9, 2.0, 2.2),
                   "tokens_per_s": _stats(1000 / 1.9, 500.0, 1000 / 2.2)}  # fmt: skip
    off["hf"] = {"output_tokens": 1000, "seconds": _stats(20.0), "tokens_per_s": _stats(50.0)}
    for d in r["decode"]:
        d["timing"] = "per_step"
        d["ours_ms"] = _stats(d["ours_ms"], 1.1 * d["ours_ms"], 0.9 * d["ours_ms"])
        d["hf_ms"] = _stats(d["hf_ms"], d["hf_ms"], d["hf_ms"])
    r["decode"][0]["hf_compiled_ms"] = _stats(4.0, 4.0, 4.0)
    r["prefill"]["ours_tokens_per_s"] = _stats(1e4, 9e3, 1.2e4)
    chat = {**SAMPLE["online"]["levels"][1], "clients": 4, "tokens_read": {"min": 16, "max": 16},
            "peak_running": 4, "peak_waiting": 0}  # fmt: skip
    r["online"]["chat"] = [{**chat, "max_tokens_sent": True}, {**chat, "max_tokens_sent": False}]
    text = render_markdown(r)
    assert "再量 3 次" in text and "离线负载量 1 次" in text
    assert "本书的离线一侧一步最多 prefill 16,384 个新 token。" in text
    assert "（上下文 8 个 token，毫秒；一次运行里整批都在 decode 时相邻两步的间隔" in text
    assert "| mini-sglang（本书） | 2.0 (±10 %) | 500 (±9 %) | — | 25 % |" in text
    assert "| transformers generate | 20.0（1 次） | 50（1 次） | 10.0× | 2 % |" in text
    assert "| transformers 静态缓存 + torch.compile | — | — | — | — |" in text
    assert "出错，没有跑完：`RuntimeError: boom`" in text
    assert "| 1 | 2.00 (±10 %) | 40.00 (±0 %) | 4.00 (±0 %) | 20.0× | 2.0× | 0.500 | 25 % |" in text
    assert "| 8 | 3.00 (±10 %) | 45.00 (±0 %) | — | 15.0× | — | 0.600 | 20 % |" in text
    assert "| 本书 | 10,000 (±20 %) | — | 1 % |" in text
    assert "| max_tokens=16 | 256 | 9.0 / 12.0 | 1.50 / 3.00 | 4 | 0 | 16 |" in text
    assert "| 不带 max_tokens | 256 | 9.0 / 12.0 | 1.50 / 3.00 | 4 | 0 | 16 |" in text
    ET.fromstring(render_plots(r))


def test_report_divides_sampled_by_tokens_read() -> None:
    """报表的"服务采样的 / 读到的"一列：分母是各请求读到的 token 之和（片段里可能多带
    几个）。"""
    r = json.loads(json.dumps(SAMPLE))
    row = {**SAMPLE["online"]["levels"][1], "peak_running": 8, "peak_waiting": 0}
    r["online"]["chat"] = [
        {**row, "max_tokens_sent": True, "tokens_sampled": 256,
         "tokens_read": {"min": 16, "max": 16, "sum": 256}},
        {**row, "max_tokens_sent": False, "tokens_sampled": 340,
         "tokens_read": {"min": 16, "max": 18, "sum": 272}},
    ]  # fmt: skip
    text = render_markdown(r)
    assert "| max_tokens=16 | 256 | 9.0 / 12.0 | 1.50 / 3.00 | 8 | 0 | 16 | 1.00 |" in text
    assert "| 不带 max_tokens | 256 | 9.0 / 12.0 | 1.50 / 3.00 | 8 | 0 | 16～18 | 1.25 |" in text
    assert "现编译" not in text  # 早先的结果没有 triton_compiles：不写
    r["online"]["chat"][1]["triton_compiles"] = 1  # 服务在这一行里现编译了一个 kernel
    r["online"]["levels"][0]["triton_compiles"] = 0
    text = render_markdown(r)
    assert "现编译了 kernel（每个都是一次几百毫秒的停顿）：对话接口 不带 max_tokens：1 个\n" in text
    assert "服务的日志里" not in text  # 早先的结果没有 compiled_kernels：不写
    r["online"]["compiled_kernels"] = ["_silu_and_mul_kernel[num_warps=4]", "_k[num_warps=2]"]
    text = render_markdown(r)
    assert "（连同预热的请求）：`_silu_and_mul_kernel[num_warps=4]`；`_k[num_warps=2]`\n" in text
    r["online"]["compiled_kernels"] = []
    assert "服务的日志里现编译的 kernel（连同预热的请求）：一个也没有\n" in render_markdown(r)


def _is_stats(x: dict[str, Any], runs: int) -> bool:
    return x["runs"] == runs == len(x["samples"]) and x["min"] <= x["median"] <= x["max"]


def test_quick_preset_kv_ignores_others_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """quick 的 KV 池正好开页表的格子数（测试在一块 GPU 上并行跑时，别的进程占着的显存不算进来）：
    设备报告一点空闲也没有时照样建得起来；服务也按格子数给 ``--num-pages``。full 仍按比例。"""
    from minisgl.benchmark import __main__ as bench
    from minisgl.engine import engine

    quick, full = PRESETS["quick"], PRESETS["full"]
    monkeypatch.setattr(engine, "memory_info", lambda device: (0, 80 << 30))
    llm = bench.make_llm(quick, quick.model, pick_device())
    try:
        plan = llm.scheduler.engine.memory_plan
        assert plan.source == "num_pages"
        assert plan.num_pages == max(quick.requests, *quick.decode_batches) * 2 * quick.lengths[1]
    finally:
        llm.shutdown()
    assert bench._server_kv(quick, 4, 1024) == ["--num-pages", "4096"]
    assert bench._server_kv(full, 64, 1024) == ["--memory-fraction", "0.3"]


def test_quick_benchmark_end_to_end(tmp_path: Path) -> None:
    quick = PRESETS["quick"]
    out = tmp_path / "quick.json"
    cmd = [sys.executable, "-m", "minisgl.benchmark", "--preset", "quick", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["meta"]["command"].endswith("--preset quick --out " + str(out))
    assert r["settings"]["runs"] == quick.runs
    assert r["settings"]["max_extend_tokens"] == quick.max_extend_tokens
    w = r["offline"]["workload"]
    assert w == make_workload(16, (16, 64), (16, 64)).describe()
    # 编译的那种（CPU 上用 eager 后端）要么跑完、真的抓到了图，要么记下了错误
    compiled = r["peers"]["hf_compiled"]
    assert compiled["backend"] == "eager"
    assert "error" in compiled or compiled["graphs"] > 0
    peers = ["hf"] + (["hf_compiled"] if "error" not in compiled else [])
    for key in ("ours", *peers):  # 都按要求的输出长度计数
        x = r["offline"][key]
        assert x["output_tokens"] == w["output_tokens"]
        runs = quick.runs if key == "ours" else quick.hf_offline_runs
        assert _is_stats(x["seconds"], runs) and _is_stats(x["tokens_per_s"], runs)
        assert x["tokens_per_s"]["min"] > 0
        assert _is_stats(r["prefill"][f"{key}_tokens_per_s"], quick.runs)
    assert 0 < r["offline"]["floor_s"] < r["offline"]["ours"]["seconds"]["min"]
    notes = r["prefill"]["ours_tokens_per_s"]["notes"]  # 每一次 prefill 都带着自己的记录
    assert len(notes) == quick.runs and all(n["steps"]["decode_steps"] == 0 for n in notes)
    assert [d["batch_size"] for d in r["decode"]] == [1, 8]
    for d in r["decode"]:  # 每一步直接计时：都是正数（不查快慢）
        assert d["floor_ms"] > 0 and d["timing"] == "per_step"
        for key in ("ours", *peers):
            assert _is_stats(d[f"{key}_ms"], quick.runs)
            assert all(math.isfinite(x) and x > 0 for x in d[f"{key}_ms"]["samples"])
    levels = r["online"]["levels"]
    assert [(x["clients"], x["requests"]) for x in levels] == [(1, 2), (4, 8)]
    assert all(x["ttft_p50_ms"] <= x["ttft_p99_ms"] for x in levels)
    # 提示的长度来自服务报的用量；下限按它、这次的屋顶线和每档的客户端数算
    config = ModelConfig.from_pretrained(REPO / quick.model)
    roof, cost = DeviceRoof(**r["roof"]), ModelCost.of(config, torch.float32)
    for x in levels:
        assert x["prompt_tokens"] > 32  # 32 个词，每个都不止一个 token
        prompt = round(x["prompt_tokens"])
        want = tpot_floor(cost, roof, x["clients"], prompt, quick.online_tokens)
        assert x["tpot_floor_ms"] == pytest.approx(1000 * want)
    with_max, without, reserved = r["online"]["chat"]
    assert [(x["kv_headroom"], x["max_tokens_sent"]) for x in r["online"]["chat"]] == [
        ("256", True),
        ("256", False),
        ("full", False),
    ]
    tokens, requests = quick.online_tokens, quick.online_chat_clients * quick.online_rounds
    assert with_max["tokens_read"] == {"min": tokens, "max": tokens, "sum": requests * tokens}
    for x in (with_max, without, reserved):  # 三种都读够了要求的 token 数
        assert x["clients"] == quick.online_chat_clients and x["requests"] == requests
        read = x["tokens_read"]
        assert tokens <= read["min"] <= read["max"] and read["sum"] >= requests * read["min"]
        assert x["tokens_sampled"] >= read["sum"]
        # 峰值是轮询 /metrics 看到的：GPU 上这么短的请求可能一次也没被看到在跑
        assert 0 <= x["peak_running"] <= quick.online_chat_clients
        assert x["ttft_p50_ms"] <= x["ttft_p99_ms"] and x["tpot_p50_ms"] <= x["tpot_p99_ms"]
    assert "本书的引擎是 transformers generate 的" in proc.stdout
    assert "不带 max_tokens" in proc.stdout
    ET.fromstring(render_plots(load_results(out)))


def test_resume_runs_only_the_parts_an_interrupted_run_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--resume``：上一次在编译的 transformers 跑到一半时被打断（decode 写了一行，prefill 还没
    写），接着跑只补这一部分；别的部分、屋顶线和下限原样留着，补跑的命令记在元数据里，表头下
    面说一句。设置不一样的结果不能接着跑。"""
    from minisgl.benchmark import __main__ as bench

    quick = PRESETS["quick"]
    partial = {
        "meta": {"command": "python -m minisgl.benchmark --preset quick", "device": "cpu",
                 "torch": "x", "python": "3", "date": "2026-12-03"},
        "model": quick.model, "dtype": quick.dtype, "settings": bench._settings(quick),
        "peers": {"hf": {"label": "transformers generate"},
                  "hf_compiled": {"label": "编译的", "backend": "eager"}},
        "roof": {"copy_bytes_per_s": 1e9, "matmul_flops": 1e12},
        "offline": {"workload": {}, "floor_s": 0.5, "ours": {"x": 1}, "hf": {"x": 2}},
        "decode": [{"batch_size": 1, "ours_ms": 1, "hf_ms": 2, "hf_compiled_ms": 3}],
        "prefill": {"ours_tokens_per_s": 1, "hf_tokens_per_s": 2},
        "online": {"levels": [], "chat": []},
    }  # fmt: skip
    assert bench.finished_parts(partial, quick) == {"ours", "online", "hf"}
    out = tmp_path / "r.json"
    save_results(partial, out)
    calls: list[tuple[str, Any, bool]] = []

    def fake_hf(p, model, work, results, backend, out_, t0, plain=True):  # type: ignore[no-untyped-def]
        calls.append(("hf", backend, plain))
        results["prefill"]["hf_compiled_tokens_per_s"] = 4
        results["offline"]["hf_compiled"] = {"x": 4}

    monkeypatch.setattr(bench, "_run_ours", lambda *a: calls.append(("ours", None, True)))
    monkeypatch.setattr(bench, "_bench_online", lambda *a: calls.append(("online", None, True)))
    monkeypatch.setattr(bench, "_bench_hf", fake_hf)
    monkeypatch.setattr(bench, "pick_device", lambda: torch.device("cpu"))
    argv = ["--preset", "quick", "--out", str(out), "--resume"]
    r = bench.run(quick, quick.model, False, False, argv, str(out), resume=True)
    assert calls == [("hf", "eager", False)]  # 只有编译的那种，普通的不再跑
    assert bench.finished_parts(r, quick) == {"ours", "online", "hf", "hf_compiled"}
    assert r["roof"] == partial["roof"] and r["offline"]["floor_s"] == 0.5
    (later,) = r["meta"]["resumed"]
    assert later["parts"] == ["hf_compiled"] and later["command"].endswith("--resume")
    assert "补跑了 transformers 静态缓存 + torch.compile" in header(r["meta"])[2]

    calls.clear()  # 全都跑完了（main 最后写下结果）：再接着跑什么也不做
    save_results(r, out)
    bench.run(quick, quick.model, False, False, argv, str(out), resume=True)
    assert calls == []
    other = {**partial, "settings": {**partial["settings"], "runs": 99}}
    save_results(other, out)
    with pytest.raises(ValueError, match="other settings"):
        bench.run(quick, quick.model, False, False, argv, str(out), resume=True)

    # 跳过的部分不算补跑：只补普通的 transformers 时，元数据和表头都只说它
    calls.clear()
    no_hf = {
        **partial, "peers": {}, "decode": [{"batch_size": 1, "ours_ms": 1}],
        "prefill": {"ours_tokens_per_s": 1},
        "offline": {"workload": {}, "floor_s": 0.5, "ours": {}},
    }  # fmt: skip
    save_results(no_hf, out)
    r = bench.run(quick, quick.model, False, False, argv, str(out), True, resume=True)
    assert calls == [("hf", None, True)]
    assert r["meta"]["resumed"][0]["parts"] == ["hf"]
    assert header(r["meta"])[2].endswith("补跑了 transformers generate")
    old_record = {**r["meta"]["resumed"][0], "parts": ["hf", "hf_compiled"]}  # 早先的代码这样记
    meta = {**r["meta"], "resumed": [old_record]}
    assert header(meta, {"hf": {}})[2].endswith("补跑了 transformers generate")  # 只有它有结果


def test_bad_out_and_resume_are_reported_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` 在第一项跑完时才第一次写：目录不存在、``--resume`` 没给 ``--out``，一开始就是
    argparse 式的报错（退出码 2），一项也不跑。"""
    from minisgl.benchmark import __main__ as bench

    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("the benchmark started"))
    for argv in (["--resume"], ["--out", str(tmp_path / "missing" / "r.json")]):
        with pytest.raises(SystemExit) as exc:
            bench.main(["--preset", "quick", *argv])
        assert exc.value.code == 2 and "error:" in capsys.readouterr().err


# ---------------------------------------------------------------- 合并的小 kernel


def _torch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """让 ``ops`` 走 PyTorch 的写法（GPU 上它默认走 Triton）：这是规格。"""
    monkeypatch.setattr(ops, "triton_ops", None)


def _qkv(gen: torch.Generator, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """从一个 qkv 大矩阵里切出的 q、k 视图：三维、跨步，和注意力层里的一样。"""
    tokens, hq, hkv, d = 13, 4, 2, 32
    qkv = (torch.randn(tokens, (hq + 2 * hkv) * d, generator=gen) * 3).to(DEVICE, dtype)
    q, k, _ = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
    return qkv, q.view(tokens, hq, d), k.view(tokens, hkv, d)


@pytest.mark.skipif(ops.triton_ops is None, reason="triton is not installed")
@pytest.mark.parametrize("dtype", DTYPES)
def test_triton_rmsnorm_matches_torch(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    triton_ops = ops.triton_ops
    gen = torch.Generator().manual_seed(0)
    tol = (
        {"rtol": 1.6e-2, "atol": 1e-5} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    )
    x = (torch.randn(7, 96, generator=gen) * 4).to(DEVICE, dtype)
    w = torch.randn(96, generator=gen).to(DEVICE, dtype)
    res = torch.randn(7, 96, generator=gen).to(DEVICE, dtype)
    poisoned = torch.full_like(x, float("nan"))
    got = triton_ops.rmsnorm(x, w, 1e-6, out=poisoned)
    got_res, got_x = res.clone(), x.clone()
    triton_ops.rmsnorm(got_x, w, 1e-6, out=got_x, residual=got_res)
    qkv, q_view, _ = _qkv(gen, dtype)
    hw = torch.randn(32, generator=gen).to(DEVICE, dtype)
    want_q = q_view.clone()  # 写回之前的一份连续副本，下面交给 PyTorch
    triton_ops.rmsnorm(q_view, hw, 1e-6, out=q_view)  # 原地写回 qkv 大矩阵里的列

    _torch_path(monkeypatch)
    torch.testing.assert_close(got, ops.rmsnorm(x, w, 1e-6), **tol)
    want_x, want_res = x.clone(), res.clone()
    ops.fused_add_rmsnorm(want_x, want_res, w, 1e-6)
    torch.testing.assert_close(got_res, want_res, rtol=0, atol=0)  # 加法逐位相同
    torch.testing.assert_close(got_x, want_x, **tol)
    ops.rmsnorm(want_q, hw, 1e-6, out=want_q)
    torch.testing.assert_close(q_view, want_q, **tol)
    assert not torch.isnan(qkv).any()


@pytest.mark.skipif(ops.triton_ops is None, reason="triton is not installed")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rotary_dim", [32, 16])  # 16：只转前一半的维度，其余不动
def test_triton_rope_matches_torch(
    dtype: torch.dtype, rotary_dim: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    gen = torch.Generator().manual_seed(1)
    qkv, q, k = _qkv(gen, dtype)
    want_qkv = qkv.clone()
    positions = torch.randint(0, 500, (q.shape[0],), generator=gen).to(DEVICE)
    angles = torch.outer(torch.arange(512.0), torch.rand(rotary_dim // 2, generator=gen))
    cache = torch.cat((angles.cos(), angles.sin()), dim=-1).to(DEVICE)
    ops.triton_ops.apply_rope_inplace(positions, q, k, cache, 32)
    _torch_path(monkeypatch)
    wq, wk, _ = want_qkv.split([q.shape[1] * 32, k.shape[1] * 32, k.shape[1] * 32], dim=-1)
    ops.apply_rope_inplace(positions, wq.view_as(q), wk.view_as(k), cache, 32)
    tol = (
        {"rtol": 1.6e-2, "atol": 1e-5} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}
    )
    torch.testing.assert_close(qkv, want_qkv, **tol)  # 包括 v 和没转的维度：原样不动


def test_profile_busy_time_is_the_union_of_intervals() -> None:
    from minisgl.benchmark.profile import busy_time_us

    assert busy_time_us([]) == 0
    assert busy_time_us([(0, 10), (5, 15), (20, 25)]) == 20  # 重叠的 5 微秒只算一次
    assert busy_time_us([(0, 30), (5, 10), (12, 20)]) == 30  # 被包住的区间不加
    assert busy_time_us([(20, 25), (0, 10)]) == 15  # 顺序无关


def test_idle_gaps_list_the_idle_stretches_and_who_was_busy_on_the_host() -> None:
    """kernel 并集之外、不短于门槛的空隙，连同开头、结尾的；每段记下和它重叠的主机函数。"""
    from minisgl.benchmark.profile import idle_gaps

    kernels = [(10, 30), (25, 40), (40.5, 50), (70, 80)]  # 40～40.5 的空隙短于门槛
    host = [(0, 12, "schedule"), (45, 75, "forward"), (50, 60, "allocate")]
    gaps = idle_gaps(kernels, host, (0, 100), min_us=5)
    assert [(g["start_ms"], g["ms"]) for g in gaps] == [(0, 0.01), (0.05, 0.02), (0.08, 0.02)]
    assert gaps[0]["host"] == {"schedule": 0.01}  # 第一个 kernel 之前：主机在准备
    assert gaps[1]["host"] == {"forward": 0.02, "allocate": 0.01}  # 嵌套的各算各的，长的在前
    assert gaps[2]["host"] == {}  # 结尾：没有包上的函数在跑
    assert idle_gaps([], [], (0, 3), min_us=5) == []
    assert idle_gaps([(0, 10)], [], (0, 10), min_us=1) == []


@pytest.mark.skipif(not DEVICE.startswith("cuda"), reason="CPU 上的孪生：上面的 idle_gaps 测试")
def test_profile_region_sees_the_host_function_behind_a_gpu_gap() -> None:
    """GPU 上：两个 kernel 之间主机在一个包上的函数里停 20 毫秒，空隙里看得见这个函数。"""
    from minisgl.benchmark.profile import profile_region

    x = torch.randn(1024, 1024, device="cuda")

    class Step:
        def pause(self) -> None:
            torch.cuda.synchronize()
            time.sleep(0.02)

    def work() -> None:
        x @ x
        Step().pause()
        x @ x

    r = profile_region(torch.device("cuda"), work, annotate=((Step, "pause"),))
    assert any("Step.pause" in g["host"] for g in r["gaps"])


def test_profile_region_ranks_the_operators() -> None:
    """CPU 上录的是 aten 算子自己的时间：按总时长从多到少排，调用次数对得上。（不断言谁排第一：
    那要看这台机器此刻快慢，测试里不比时间。）"""
    from minisgl.benchmark.profile import profile_region

    a = torch.randn(256, 256)

    def work() -> None:
        for _ in range(3):
            a @ a
        a.add(1)

    class Step:
        def run(self) -> None:
            work()

    real = Step.__dict__["run"]
    r = profile_region(torch.device("cpu"), Step().run, annotate=((Step, "run"),))
    calls = {k["name"]: k["calls"] for k in r["kernels"]}
    assert calls["aten::mm"] == 3 and calls["aten::add"] == 1
    assert "Step.run" not in calls  # 包上的函数不是算子
    totals = [k["total_ms"] for k in r["kernels"]]
    assert totals == sorted(totals, reverse=True)
    assert 0 < r["busy_ms"] and r["wall_ms"] > 0 and r["launches"] >= 4
    assert r["gaps"] == []  # CPU 上没有 kernel 的时间线
    assert Step.__dict__["run"] is real  # 录完换回原来的方法


def test_profile_script_runs_the_quick_preset(tmp_path: Path) -> None:
    """``python -m minisgl.benchmark.profile --preset quick``：一段 prefill、两段 decode 都录下来，
    每段都有主机这一侧的计时，存下的 JSON 读得回来、排得成表。"""
    from minisgl.benchmark import profile

    out = tmp_path / "profile.json"
    assert profile.main(["--preset", "quick", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert list(result["regions"]) == ["prefill 4×32", "decode bs1×8", "decode bs4×8"]
    for r in result["regions"].values():
        assert r["busy_ms"] > 0 and r["host_wall_ms"] > 0 and r["kernels"]
        assert r["host"]["Scheduler.forward"]["calls"] >= 1  # 不开 profiler 的那一次真的走了调度器
        if result["device"] == "cpu":
            assert r["gaps"] == []  # CPU 上没有 kernel 的时间线
        assert all(g["ms"] >= 1 and g["start_ms"] >= 0 for g in r["gaps"])
    assert "主机这一侧" in profile.render(result)


def test_host_timers_count_calls_and_put_the_methods_back() -> None:
    """计时器记下次数（抛出异常的那次也算），退出 ``with`` 以后类上还是原来的方法。"""
    from minisgl.benchmark.profile import HOST_STEPS, host_timers

    class Box:
        def work(self, n: int) -> int:
            if n < 0:
                raise ValueError(n)
            return n + 1

    real = Box.__dict__["work"]
    with host_timers(((Box, "work"),)) as stats:
        assert Box().work(1) == 2 and Box().work(2) == 3
        with pytest.raises(ValueError):
            Box().work(-1)
        assert Box.__dict__["work"] is not real
    assert stats == {"Box.work": {"calls": 3, "total_ms": stats["Box.work"]["total_ms"]}}
    assert stats["Box.work"]["total_ms"] >= 0
    assert Box.__dict__["work"] is real
    # 默认的那几个函数都真的在各自的类上（改了名字，这里先失败）
    assert all(callable(cls.__dict__.get(name)) for cls, name in HOST_STEPS)
