"""离线的三项：整个工作负载的吞吐、每个批大小的 decode 延迟、prefill 吞吐。

我们的引擎和 transformers 走同样的输入：随机 token 的提示，``ignore_eos``（transformers 那边
``min_new_tokens = max_new_tokens``），按要求的输出长度计数。每一行都先在同样的形状上预热一次
（CUDA Graph、Triton 和 torch.compile 的编译、cuBLAS 的选择都不算在内），再量几次，报告中位数和
最小、最大值（``repeat``）。每一次都换一批随机 token：长度不变，前缀缓存帮不上忙。

decode 的一步直接计时：一次运行里，整批都在 decode 时相邻两步结果到达主机的间隔，取中位数。
prefill 不在任何一个间隔里。
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from minisgl.core import SamplingParams
from minisgl.kernel.compiles import watch_triton_compiles
from minisgl.llm import LLM
from minisgl.scheduler import PendingReq
from minisgl.utils import synchronize

__all__ = [
    "HFPeer",
    "Workload",
    "decode_latency",
    "decode_step_times",
    "hf_decode_latency",
    "hf_decode_step_times",
    "hf_prefill",
    "load_hf",
    "make_workload",
    "prefill_throughput",
    "repeat",
    "run_hf",
    "run_ours",
    "sample_notes",
    "summarize",
    "timed",
]


@dataclass(frozen=True)
class Workload:
    """一批请求：每个请求的提示（token id）和要生成的 token 数。"""

    prompts: list[list[int]]
    output_lens: list[int]

    @property
    def output_tokens(self) -> int:
        return sum(self.output_lens)

    @property
    def input_tokens(self) -> int:
        return sum(len(p) for p in self.prompts)

    def describe(self) -> dict[str, Any]:
        return {
            "requests": len(self.prompts),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }

    def with_fresh_tokens(self, seed: int, vocab: tuple[int, int] = (100, 10000)) -> Workload:
        """同样的长度，换一批随机 token：重复量同一个负载时，前缀缓存帮不上忙。"""
        rng = random.Random(seed)
        prompts = [[rng.randrange(*vocab) for _ in p] for p in self.prompts]
        return Workload(prompts, self.output_lens)


def make_workload(
    num_requests: int,
    input_range: tuple[int, int],
    output_range: tuple[int, int],
    seed: int = 0,
    vocab: tuple[int, int] = (100, 10000),
) -> Workload:
    """nano-vllm / mini-sglang 的离线负载：输入、输出长度在闭区间里均匀分布，token 随机。

    同一个种子得到同一批请求（和设备、进程无关）。token 避开词表开头的特殊 token。"""
    rng = random.Random(seed)
    prompts, outs = [], []
    for _ in range(num_requests):
        n = rng.randint(*input_range)
        prompts.append([rng.randrange(*vocab) for _ in range(n)])
        outs.append(rng.randint(*output_range))
    return Workload(prompts, outs)


def timed(device: torch.device, fn: Callable[[], Any]) -> float:
    """``fn()`` 的秒数。两端各同步一次：GPU 是异步的，不同步的话起点会算进之前残留的工作，
    终点会漏掉还在排队的 kernel。"""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def summarize(samples: Sequence[float]) -> dict[str, Any]:
    """几次测量 → 中位数、最小、最大、次数和每一次的值。表格和比值都用中位数：一次偶然的慢
    （别的进程、时钟降频）拉不动它。"""
    if not samples:
        raise ValueError("no samples")
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "runs": len(samples),
        "samples": list(samples),
    }


def repeat(
    measure: Callable[[int], float], runs: int, warmup: Callable[[], Any] | None = None
) -> dict[str, Any]:
    """先预热一次（默认就是 ``measure(0)``，结果不要），再量 ``runs`` 次（``measure(1)`` ……
    ``measure(runs)``）。参数是第几次：拿它当种子换一批提示。"""
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    (warmup or (lambda: measure(0)))()
    return summarize([measure(i) for i in range(1, runs + 1)])


def _alloc_retries(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    return int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))


@contextmanager
def _triton_compiles() -> Iterator[Callable[[], list[str] | None]]:
    """``with`` 块里 Triton 新编译了哪些 kernel（见 ``watch_triton_compiles``），产出一个读数的
    函数：每编译一个，一行 Triton 自己写的说明。看不到编译时读数是 None；解释器不编译，CPU 上
    总是空的。"""
    compiled: list[str] = []
    stop = watch_triton_compiles(compiled.append)
    try:
        yield (lambda: None) if stop is None else (lambda: list(compiled))
    finally:
        if stop is not None:
            stop()


@contextmanager
def sample_notes(llm: LLM) -> Iterator[dict[str, Any]]:
    """量一次的同时记下几件可能让这一次变慢的事，``with`` 块结束时填进产出的字典：

    - ``steps``：调度器这一次走了几步 prefill、几步 decode，退回了几个请求；
    - ``gc_pauses``、``gc_longest_ms``：Python 的垃圾回收停下来几次、最长的一次多少毫秒；
    - ``alloc_retries``：CUDA 的缓存分配器因为显存不够、把缓存还给驱动再重试了几次；
    - ``wall_ms``、``in_steps_ms``、``longest_step_ms``：``with`` 块的墙钟时间，其中花在
      ``scheduler.step()`` 里的（一步里有主机的准备、GPU 的计算和等它）和最长的一步。慢出来的
      时间在不在某一步里、还是在步与步之外（加请求、收结果），一看便知；
    - ``triton_compiles``：Triton 在这一次里新编译了几个 kernel。一组没见过的参数（比如一个整数
      参数头一回不是 16 的倍数）会让 Triton 当场再编译一份，一次要几十到几百毫秒；
      ``triton_kernels`` 是它们各自的说明（哪个 kernel、哪组特化）。

    偶尔有一次慢得离谱时（H200 上 prefill 的五次里曾有一次慢了 6 倍），拿它和别的几次对照。"""
    scheduler = llm.scheduler
    before = dict(scheduler.stats)
    retries = _alloc_retries(scheduler.engine.device)
    starts: list[float] = []
    pauses: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            starts.append(time.perf_counter())
        elif starts:
            pauses.append(time.perf_counter() - starts.pop())

    step_seconds: list[float] = []
    step = scheduler.step

    def timed_step() -> Any:
        start = time.perf_counter()
        try:
            return step()
        finally:
            step_seconds.append(time.perf_counter() - start)

    notes: dict[str, Any] = {}
    gc.callbacks.append(on_gc)
    scheduler.step = timed_step  # type: ignore[method-assign]  # 实例属性盖住方法，结束时删掉
    start = time.perf_counter()
    try:
        with _triton_compiles() as compiles:
            yield notes
    finally:
        wall = time.perf_counter() - start
        del scheduler.step
        gc.callbacks.remove(on_gc)
    notes["steps"] = {
        key: scheduler.stats[key] - before[key]
        for key in ("prefill_steps", "decode_steps", "retracted")
        if key in before
    }
    notes["gc_pauses"] = len(pauses)
    notes["gc_longest_ms"] = 1000 * max(pauses, default=0.0)
    notes["alloc_retries"] = _alloc_retries(scheduler.engine.device) - retries
    notes["wall_ms"] = 1000 * wall
    notes["in_steps_ms"] = 1000 * sum(step_seconds)
    notes["longest_step_ms"] = 1000 * max(step_seconds, default=0.0)
    kernels = compiles()
    notes["triton_compiles"] = None if kernels is None else len(kernels)
    notes["triton_kernels"] = kernels or []


def _params(output_lens: Sequence[int]) -> list[SamplingParams]:
    return [SamplingParams(max_tokens=n, ignore_eos=True) for n in output_lens]


def _generate_once(llm: LLM, work: Workload) -> float:
    got: list[int] = []
    device = llm.scheduler.engine.device
    outputs = _params(work.output_lens)
    seconds = timed(
        device, lambda: got.extend(len(o.token_ids) for o in llm.generate(work.prompts, outputs))
    )
    if got != work.output_lens:  # ignore_eos：每个请求都应该恰好生成要求的长度
        raise RuntimeError("the engine did not generate the requested number of tokens")
    return seconds


def _throughput(tokens: int, seconds: dict[str, Any]) -> dict[str, Any]:
    """用时的统计 → 吞吐的统计（每一次各自换算，中位数仍是中位数）。"""
    return {
        "output_tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": summarize([tokens / s for s in seconds["samples"]]),
    }


def run_ours(llm: LLM, work: Workload, runs: int) -> dict[str, Any]:
    """整个负载一次交给 ``LLM.generate``（调度器自己组批）：预热一遍同样的负载，再量 ``runs``
    遍，每一遍换一批 token。"""
    seconds = repeat(lambda i: _generate_once(llm, work.with_fresh_tokens(1000 + i)), runs)
    return _throughput(work.output_tokens, seconds)


def decode_step_times(llm: LLM, prompts: Sequence[Sequence[int]], steps: int) -> list[float]:
    """把 ``prompts`` 直接交给调度器，每个请求生成 ``1 + steps`` 个 token（prefill 出第 1 个，
    之后 decode ``steps`` 步），返回整批 decode 的每一步的秒数，恰好 ``steps`` 个。

    一步是相邻两次 ``step()`` 返回之间的墙钟时间，只记返回的是整批 decode 结果的那几次：每个请求
    各一个 token，而且都已经拿到过 prefill 的那个。``step()`` 返回前要读回这一步采样出的 token
    （重叠调度时先等它拷回主机的事件），这一步在设备上已经算完，不用另外同步。重叠调度时第 N 步
    的结果在第 N+1 步发出之后才处理，相邻两次返回之间照样是一步。prefill（可能分成几步）的结果
    都在第一个 decode 结果之前返回：它不在任何一个间隔里。"""
    scheduler = llm.scheduler
    params = SamplingParams(max_tokens=1 + steps, ignore_eos=True)
    for uid, ids in enumerate(prompts):
        req = PendingReq(uid, torch.tensor(ids, dtype=torch.int32), params)
        rejected = scheduler.add_request(req)
        if rejected is not None:
            raise RuntimeError(f"request {uid} was rejected: {rejected.error}")
    received = [0] * len(prompts)  # 每个请求已经收到几个 token
    seconds: list[float] = []
    last = time.perf_counter()
    while scheduler.has_work:
        uids = [o.uid for o in scheduler.step() if o.token is not None]
        now = time.perf_counter()
        if len(uids) == len(prompts) and all(received[u] for u in uids):
            seconds.append(now - last)
        for u in uids:
            received[u] += 1
        last = now
    # 整批没有一起走完 steps 步（页不够退回了请求、批大小超过了 max_running_reqs）：这个数不算
    if received != [1 + steps] * len(prompts) or len(seconds) != steps:
        raise RuntimeError(f"timed {len(seconds)} full-batch decode steps, expected {steps}")
    return seconds


def decode_latency(
    llm: LLM, batch_size: int, context_len: int, steps: int, runs: int, seed: int = 1
) -> dict[str, Any]:
    """批大小 ``batch_size``、上下文 ``context_len`` 时每一步 decode 的毫秒数。

    每一次运行是一批新的随机提示（前缀缓存帮不上忙），``decode_step_times`` 量出 ``steps`` 步，
    取中位数：偶尔一步被别的进程、垃圾回收拖慢，拉不动它。"""

    def once(i: int) -> float:
        w = make_workload(batch_size, (context_len, context_len), (1, 1), seed=seed + 1000 * i)
        return 1000 * statistics.median(decode_step_times(llm, w.prompts, steps))

    return repeat(once, runs)


def prefill_throughput(
    llm: LLM, batch_size: int, context_len: int, runs: int, seed: int = 2
) -> dict[str, Any]:
    """只做 prefill（生成 1 个 token）时每秒处理的提示 token 数。每一次的 ``sample_notes``
    按次序放在 ``notes`` 里（预热的那次不算）。"""
    device = llm.scheduler.engine.device
    notes: list[dict[str, Any]] = []

    def once(i: int) -> float:
        w = make_workload(batch_size, (context_len, context_len), (1, 1), seed=seed + 1000 * i)
        with sample_notes(llm) as note:
            seconds = timed(device, lambda: llm.generate(w.prompts, _params([1] * batch_size)))
        notes.append(note)
        return w.input_tokens / seconds

    result = repeat(once, runs)
    result["notes"] = notes[1:]
    return result


# ---------------------------------------------------------------- transformers


def load_hf(model_path: str, device: torch.device, dtype: torch.dtype, dummy: bool) -> Any:
    """transformers 的模型。``dummy``：没有权重文件时按配置随机初始化（固定种子）。"""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils.logging import disable_progress_bar

    disable_progress_bar()  # 不要"Loading weights"进度条
    if dummy:
        torch.manual_seed(0)
        config = AutoConfig.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    return model.to(device).eval()


@dataclass
class HFPeer:
    """transformers 的一种用法：模型，加上每次 ``generate`` 都带的参数。"""

    model: Any
    generate_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def compiled(self) -> bool:
        return "compile_config" in self.generate_kwargs

    @staticmethod
    def static_compiled(model: Any, backend: str) -> HFPeer:
        """用户提速时最先试的写法：静态 KV 缓存，``generate`` 见到它就自动 ``torch.compile``
        decode 的前向（transformers 的 ``CompileConfig``；prefill 仍是即时执行）。``backend``：
        GPU 上 ``inductor``（默认的 ``reduce-overhead``，带 CUDA Graph）；``eager`` 只走 dynamo
        抓图、不生成代码，CPU 上不需要 C++ 编译器，测试用它走同一条路。"""
        from transformers import CompileConfig

        config = CompileConfig(
            backend=backend, mode="reduce-overhead" if backend == "inductor" else None
        )
        # transformers 只在 GPU 这类设备上自动编译；这个开关是它留给测试的：CPU 上也编译
        config._compile_all_devices = model.device.type == "cpu"
        return HFPeer(model, {"cache_implementation": "static", "compile_config": config})


def _hf_generate(
    peer: HFPeer, prompts: Sequence[Sequence[int]], new_tokens: int, streamer: Any = None
) -> Any:
    """左补齐的一个静态批次，恰好生成 ``new_tokens`` 个 token（不看停止符）。"""
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    device = peer.model.device
    with torch.inference_mode():
        return peer.model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=0,
            streamer=streamer,
            **peer.generate_kwargs,
        )


def _hf_offline_warmup(peer: HFPeer, batches: list[tuple[list[list[int]], int]]) -> None:
    """离线负载的预热。即时执行的没有要编译的：每一批的 prefill 形状跑一遍、带两步 decode 就够。
    编译的 decode 按（批大小，静态缓存的长度）编译，而缓存的长度 = 提示宽度 + 新 token 数，
    并且 transformers 会沿用之前更长的缓存：每种批大小跑一遍缓存最长的那一批，之后的批次
    都用同一个长度、不再编译——不必把整个负载预热一遍。"""
    if not peer.compiled:
        for prompts, _ in batches:
            _hf_generate(peer, prompts, 2)
        return
    for size in sorted({len(p) for p, _ in batches}):
        same = [b for b in batches if len(b[0]) == size]
        prompts, n = max(same, key=lambda b: max(map(len, b[0])) + b[1])
        _hf_generate(peer, prompts, n)


def run_hf(peer: HFPeer, work: Workload, batch_size: int, runs: int) -> dict[str, Any]:
    """transformers 跑同一个负载：按顺序每 ``batch_size`` 个请求一个静态批次，每批生成到本批
    最长的输出。只按要求的输出长度计数——批里短的请求多生成的 token 不算。"""
    batches = [
        (work.prompts[i : i + batch_size], max(work.output_lens[i : i + batch_size]))
        for i in range(0, len(work.prompts), batch_size)
    ]

    def once(_: int) -> float:
        return timed(peer.model.device, lambda: [_hf_generate(peer, p, n) for p, n in batches])

    seconds = repeat(once, runs, warmup=lambda: _hf_offline_warmup(peer, batches))
    return _throughput(work.output_tokens, seconds)


class _StepClock:
    """交给 ``generate`` 的 streamer：每次 ``put`` 记下时刻。第一次是提示本身（prefill 之前），
    之后每一步一次，收到的是这一步的新 token。CPU、CUDA 上 transformers 先把 token 拷回主机
    （``tokens.cpu()``，要等这一步在设备上算完）再调 ``put``，编译的静态缓存也一样（只换了
    decode 的前向，循环不变）：时刻就是这一步算完的时刻。"""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def put(self, value: torch.Tensor) -> None:
        self.stamps.append(time.perf_counter())

    def end(self) -> None:
        pass


def hf_decode_step_times(peer: HFPeer, prompts: Sequence[Sequence[int]], steps: int) -> list[float]:
    """transformers 生成 ``1 + steps`` 个 token，返回 decode 每一步的秒数（``steps`` 个）：第 1 个
    token（prefill 出的）之后，相邻两次 ``put`` 的间隔。"""
    clock = _StepClock()
    _hf_generate(peer, prompts, 1 + steps, streamer=clock)
    if len(clock.stamps) != 2 + steps:  # 提示、prefill 出的 token、每步 decode 各一次
        raise RuntimeError(f"the streamer got {len(clock.stamps)} puts, expected {2 + steps}")
    decoded = clock.stamps[1:]
    return [b - a for a, b in zip(decoded, decoded[1:])]


def hf_decode_latency(
    peer: HFPeer, batch_size: int, context_len: int, steps: int, runs: int
) -> dict[str, Any]:
    """和 ``decode_latency`` 一样（毫秒/步）：一次运行量 ``steps`` 步，取中位数。transformers 没有
    前缀缓存，同一批提示量几次都一样。"""
    prompts = make_workload(batch_size, (context_len, context_len), (1, 1), seed=3).prompts

    def once(_: int) -> float:
        return 1000 * statistics.median(hf_decode_step_times(peer, prompts, steps))

    return repeat(once, runs)


def hf_prefill(peer: HFPeer, batch_size: int, context_len: int, runs: int) -> dict[str, Any]:
    """只做 prefill（生成 1 个 token）时每秒处理的提示 token 数。"""
    prompts = make_workload(batch_size, (context_len, context_len), (1, 1), seed=2).prompts

    def once(_: int) -> float:
        return (
            batch_size
            * context_len
            / timed(peer.model.device, lambda: _hf_generate(peer, prompts, 1))
        )

    return repeat(once, runs)
