"""在线：拉起 ``python -m minisgl``，用官方的 ``openai`` 客户端同时发请求，量 TTFT 和 TPOT。

TTFT（time to first token）：发出请求到收到第一段文本；TPOT（time per output token）：之后
每个 token 的平均间隔。每一档并发 ``c`` 个客户端，每个依次发 ``rounds`` 个请求。

另有一组对照（``run_chat_clients``）：对话接口，同样的提示、读同样多的 token，一种带
``max_tokens``，一种不带（对话接口的默认：服务最多可以生成到整个上下文）——不带的客户端读够
了就关掉流，服务在断开时中止请求。运行时另起一个线程轮询 ``/metrics``，记下调度器里同时在跑、
在排队的请求数的峰值：不带 ``max_tokens`` 的请求如果按整个上下文预留 KV，同时跑的就少。

客户端本身也要花 CPU：``openai`` 客户端每收到一段 SSE 都要解析 JSON、构造 pydantic 对象，
几十个线程挤在一个进程里时受 GIL 限制，量到的可能是客户端而不是服务。``processes`` 大于 1 时
把客户端分到几个子进程里（各自一个线程池，同时开始），每个进程的负担小到不再是瓶颈。
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from minisgl.kernel.compiles import COMPILE_WARNING
from minisgl.server.launch import start_background_server

__all__ = [
    "compiled_kernels",
    "counters_when_idle",
    "peak_metrics",
    "percentile",
    "run_chat_clients",
    "run_clients",
    "serve",
]

# TTFT、TPOT、输出（读到）的 token 数、总用时、提示的 token 数（都来自服务报的用量）
Sample = tuple[float, float, int, float, int]


@contextmanager
def serve(
    model: str, *args: str, timeout: float = 600, compiled: list[str] | None = None
) -> Iterator[str]:
    """在后台启动服务（第 15 章的 ``start_background_server``），给出 base url；
    结束时像 Ctrl-C 一样让它按顺序关闭，关不掉就整组杀掉。给了 ``compiled`` 时，关闭之前把
    服务日志里现编译的 kernel 追加进去（``compiled_kernels``）。"""
    server = start_background_server(model, *args, name="minisgl-bench", timeout=timeout)
    try:
        yield server.url
    finally:
        try:
            if compiled is not None:
                compiled += compiled_kernels(server.log_text())
            server.stop()
        finally:
            server.kill()


def compiled_kernels(log: str) -> list[str]:
    """调度器每数到一次现编译就写一行警告（``COMPILE_WARNING`` 接 Triton 的说明）：取出说明里
    参数表之前的那段，也就是 kernel 名和编译参数（warp 数、流水级数……）。"""
    return [
        line.split(COMPILE_WARNING, 1)[1].split("(", 1)[0]
        for line in log.splitlines()
        if COMPILE_WARNING in line
    ]


def percentile(values: Sequence[float], q: float) -> float:
    """线性插值的百分位数（q 在 0～100）。"""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _timed_stream(
    stream: Any, text: Callable[[Any], str | None], tokens: int, stop_early: bool, start: float
) -> Sample:
    """读一个流式回复（``start`` 是发出请求的时刻），返回（TTFT、TPOT、token 数、总用时、提示的
    token 数）。
    token 数取服务报的用量：服务忙时一个片段可能装着几个 token，数片段会数少。``stop_early`` 时
    读到 ``tokens`` 个就关掉流（像一个不再读的客户端），这要每个片段都带着到那一刻为止的用量
    （``continuous_usage_stats``），读到的可能比 ``tokens`` 多几个（最后一个片段里的）；否则读完
    整个流，用量在最后。TPOT 是第一个片段之后的 token 平均隔多久到一个（不知道第一个片段里有
    几个 token 时按一个算）。"""
    first = last = 0.0
    first_used = used = prompt = 0
    with stream:  # 退出时关掉连接：提前停下时，服务看到断开、中止这个请求
        for chunk in stream:
            if chunk.usage is not None:
                used, prompt = chunk.usage.completion_tokens, chunk.usage.prompt_tokens
            if chunk.choices and text(chunk.choices[0]):
                last = time.perf_counter()
                if not first:
                    first, first_used = last, max(used, 1)
                if stop_early and used >= tokens:
                    break
    if used < tokens or (used > tokens and not stop_early) or not first:
        raise RuntimeError(f"expected {tokens} tokens, got {used}")
    return first - start, (last - first) / max(used - first_used, 1), used, last - start, prompt


def _stream(create: Callable[..., Any], continuous_usage: bool, **body: Any) -> Any:
    """流式发一个请求，生成到 eos 也不停（``ignore_eos``，压测用）；``continuous_usage`` 时每个
    片段都带用量，否则只有最后多一个带用量的片段。"""
    options = {"include_usage": True, "continuous_usage_stats": continuous_usage}
    return create(
        model="bench",
        temperature=0,
        stream=True,
        stream_options=options,
        extra_body={"ignore_eos": True},
        **body,
    )


def _one_request(client: Any, prompt: str, max_tokens: int) -> Sample:
    """补全接口流式发一个请求，读完整个流。"""
    start = time.perf_counter()
    stream = _stream(client.completions.create, False, prompt=prompt, max_tokens=max_tokens)
    return _timed_stream(stream, lambda choice: choice.text, max_tokens, False, start)


def _chat_request(client: Any, prompt: str, tokens: int, send_max_tokens: bool) -> Sample:
    """对话接口流式发一个请求，读 ``tokens`` 个 token。带 ``max_tokens`` 时读完整个流；不带时
    读够 ``tokens`` 个就关掉流。两种都要每个片段带用量：要比较的两行，服务做的事只差在这里。"""
    start = time.perf_counter()
    extra = {"max_tokens": tokens} if send_max_tokens else {}
    messages = [{"role": "user", "content": prompt}]
    stream = _stream(client.chat.completions.create, True, messages=messages, **extra)
    return _timed_stream(
        stream, lambda choice: choice.delta.content, tokens, not send_max_tokens, start
    )


def _run_pool(
    clients: int | range, rounds: int, prompt_words: int, request: Callable[[str], Sample]
) -> tuple[list[Sample], float]:
    """``clients`` 个客户端同时开始，各自依次发 ``rounds`` 个请求；返回每个请求的结果和总用时。
    每个提示以轮次开头、里面带着客户端的编号：彼此只有开头一两个 token 相同。``clients`` 也可以
    是一段编号：分到几个进程时，每个进程只跑其中一段。"""
    ids = range(clients) if isinstance(clients, int) else clients

    def worker(i: int) -> list[Sample]:
        prompt = " ".join(f"w{i}x{j}" for j in range(prompt_words))
        return [request(f"{r} {prompt}") for r in range(rounds)]

    start = time.perf_counter()
    with ThreadPoolExecutor(len(ids)) as pool:
        results = [x for xs in pool.map(worker, ids) for x in xs]
    return results, time.perf_counter() - start


# 一个请求怎么发：("text", max_tokens) 走补全接口，("chat", tokens, send_max_tokens) 走对话接口
RequestSpec = tuple[Any, ...]


def _requester(client: Any, spec: RequestSpec) -> Callable[[str], Sample]:
    if spec[0] == "text":
        return lambda prompt: _one_request(client, prompt, spec[1])
    return lambda prompt: _chat_request(client, prompt, spec[1], spec[2])


def _run_processes(
    base: str, clients: int, rounds: int, prompt_words: int, spec: RequestSpec, processes: int
) -> tuple[list[Sample], float]:
    """和 ``_run_pool`` 一样，只是客户端按编号分成 ``processes`` 段，每段一个子进程。

    子进程用 ``subprocess`` 起（``python -m`` 本模块），不用 ``multiprocessing``：spawn 会在子进程
    里重新执行调用方的主脚本。每个子进程建好客户端后报"就绪"，等齐了才一起放行，用时从放行算起。
    """
    bounds = [clients * k // processes for k in range(processes + 1)]
    procs = []
    for lo, hi in itertools.pairwise(bounds):
        job = [base, lo, hi, rounds, prompt_words, list(spec)]
        cmd = [sys.executable, "-m", __name__, json.dumps(job)]
        procs.append(
            subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        )
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"client process {proc.pid} failed to start")
        start = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        # 读到结果那一行就停表：子进程退出时解释器的收尾（torch 之类）不算进用时
        outputs = [proc.stdout.readline() for proc in procs]  # type: ignore[union-attr]
        wall = time.perf_counter() - start
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    if not all(outputs):  # 出错的子进程没写结果就退出了（报错在它的 stderr 里）
        raise RuntimeError("a client process failed")
    results = [tuple(x) for out in outputs for x in json.loads(out)]
    return results, wall  # type: ignore[return-value]


def _client_process(job: list[Any]) -> None:
    """``_run_processes`` 的子进程：跑编号 ``[lo, hi)`` 的客户端，结果以 JSON 写到标准输出。"""
    base, lo, hi, rounds, prompt_words, spec = job
    request = _requester(_client(base), tuple(spec))
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    results, _ = _run_pool(range(lo, hi), rounds, prompt_words, request)
    print(json.dumps(results), flush=True)


def _summary(clients: int, results: list[Sample], wall: float) -> dict[str, Any]:
    ttft = [r[0] for r in results]
    tpot = [r[1] for r in results]
    return {
        "clients": clients,
        "requests": len(results),
        "wall_s": wall,
        "output_tokens_per_s": sum(r[2] for r in results) / wall,
        "ttft_p50_ms": 1000 * percentile(ttft, 50),
        "ttft_p99_ms": 1000 * percentile(ttft, 99),
        "tpot_p50_ms": 1000 * percentile(tpot, 50),
        "tpot_p99_ms": 1000 * percentile(tpot, 99),
        "latency_p50_s": percentile([r[3] for r in results], 50),
        "prompt_tokens": sum(r[4] for r in results) / len(results),  # 平均每个请求
    }


def _client(base: str) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=600)


def _warm_up(base: str, spec: RequestSpec) -> None:
    """同一种请求先发一个小的（4 个 token）：第一次请求的开销不算进测量。"""
    _requester(_client(base), (spec[0], 4, *spec[2:]))("warm up")


def _run(
    base: str, clients: int, rounds: int, prompt_words: int, spec: RequestSpec, processes: int
) -> tuple[list[Sample], float]:
    """让 ``clients`` 个客户端在本进程（``processes`` 为 1）或者分到 ``processes`` 个子进程里跑。"""
    if processes > 1:
        return _run_processes(base, clients, rounds, prompt_words, spec, processes)
    return _run_pool(clients, rounds, prompt_words, _requester(_client(base), spec))


def run_clients(
    base: str, clients: int, rounds: int, prompt_words: int, max_tokens: int, processes: int = 1
) -> dict[str, Any]:
    """补全接口，每个请求 ``max_tokens`` 个 token；客户端分到 ``processes`` 个进程里。
    另有这一轮里服务的几个计数（见 ``_server_side``）。"""
    spec: RequestSpec = ("text", max_tokens)
    _warm_up(base, spec)
    before = counters_when_idle(base)
    results, wall = _run(base, clients, rounds, prompt_words, spec, processes)
    after = counters_when_idle(base, before["sampled"] + sum(r[2] for r in results))
    return {**_summary(clients, results, wall), "client_processes": processes,
            **_server_side(before, after)}  # fmt: skip


def _server_side(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """一轮前后两份账目之差：服务现编译了几个 kernel（一次就是几百毫秒的停顿，TTFT、TPOT 的 p99
    会看得见），调度器走了几步、平均每步等 GPU 多少毫秒（重叠调度时：等得多是 GPU 忙、主机有余裕；
    几乎不等，是 GPU 算完了在等主机发下一步）。"""
    steps = int(after["steps"] - before["steps"])
    wait_ms = 1000 * (after["gpu_wait_s"] - before["gpu_wait_s"])
    return {
        "triton_compiles": int(after["triton_compiles"] - before["triton_compiles"]),
        "scheduler_steps": steps,
        "gpu_wait_ms_per_step": wait_ms / steps if steps else None,
    }


_GAUGE = re.compile(r"^minisgl_(running|waiting)_requests (\S+)$", re.MULTILINE)
# 调度器报的计数器：采样出的 token 数，Triton 新编译的 kernel 数，前向的步数，主机等 GPU 的秒数
_COUNTERS = {
    "sampled": "tokens_sampled",
    "triton_compiles": "triton_compiles",
    "steps": "scheduler_steps",
    "gpu_wait_s": "scheduler_gpu_wait_seconds",
}


def _read_metrics(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
        return resp.read().decode()


def _gauges(text: str) -> dict[str, float]:
    return {name: float(value) for name, value in _GAUGE.findall(text)}


def _read_gauges(base: str) -> dict[str, float]:
    return _gauges(_read_metrics(base))


def _counter(text: str, name: str) -> float:
    found = re.search(rf"^minisgl_{name}_total (\S+)$", text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"the server reports no minisgl_{name}_total")
    return float(found.group(1))


def counters_when_idle(base: str, at_least: int = 0, timeout: float = 60.0) -> dict[str, float]:
    """调度器闲下来（没有在跑、在排队的请求）以后的计数器（``_COUNTERS``）：它一共采样过的
    token 数（``sampled``）、Triton 新编译过的 kernel 数、走过的步数、等 GPU 的秒数。变成空闲时
    调度器一定报一次账，这时读到的数不会再变。``at_least`` 是调用方知道的采样数的下限（之前的数
    加上客户端读到的）：读到的账目比它少，就是还没送到的那份之前的旧账，接着等。客户端都走了、
    服务却一直闲不下来，是个错误。"""
    deadline = time.monotonic() + timeout
    while True:
        text = _read_metrics(base)
        gauges = _gauges(text)
        counters = {key: _counter(text, name) for key, name in _COUNTERS.items()}
        idle = gauges.get("running") == 0 and gauges.get("waiting") == 0
        if idle and counters["sampled"] >= at_least:
            return counters
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the server still runs {gauges.get('running')} requests"
                f" ({counters['sampled']} tokens sampled, at least {at_least} expected)"
            )
        time.sleep(0.05)


@contextmanager
def peak_metrics(base: str, interval: float = 0.05) -> Iterator[dict[str, float]]:
    """运行期间在后台轮询 ``/metrics``：交出的字典里是 ``running``、``waiting`` 两个 gauge
    到目前为止的最大值（调度器每一步报一次账，轮询得够勤才不漏掉峰值）。"""
    peak: dict[str, float] = {}
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                gauges = _read_gauges(base)
            except OSError:  # 服务忙得一时答不上来：少一个样本，不该让整个测试失败
                gauges = {}
            for name, value in gauges.items():
                peak[name] = max(peak.get(name, 0.0), value)
            done.wait(interval)

    thread = threading.Thread(target=poll, name="metrics-poller", daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()


def run_chat_clients(
    base: str,
    clients: int,
    rounds: int,
    prompt_words: int,
    tokens: int,
    send_max_tokens: bool,
    processes: int = 1,
) -> dict[str, Any]:
    """对话接口：每个请求读 ``tokens`` 个 token，带或不带 ``max_tokens``（``_chat_request``）。
    除了 ``run_clients`` 的各项，还有每个请求读到的 token 数的范围、同时在跑和在排队的请求数的
    峰值，这一轮里服务一共采样了几个 token、现编译了几个 kernel（都读自 ``/metrics``）：不带
    ``max_tokens`` 时，客户端关掉流以后、服务中止请求以前，采样出的 token 没有人读。"""
    spec: RequestSpec = ("chat", tokens, send_max_tokens)
    _warm_up(base, spec)
    before = counters_when_idle(base)  # 预热之后：预热的请求不算
    with peak_metrics(base) as peak:
        results, wall = _run(base, clients, rounds, prompt_words, spec, processes)
    read = [r[2] for r in results]
    after = counters_when_idle(base, before["sampled"] + sum(read))
    return {
        **_summary(clients, results, wall),
        "client_processes": processes,
        "max_tokens_sent": send_max_tokens,
        "tokens_read": {"min": min(read), "max": max(read), "sum": sum(read)},
        "peak_running": int(peak.get("running", 0)),
        "peak_waiting": int(peak.get("waiting", 0)),
        "tokens_sampled": int(after["sampled"] - before["sampled"]),
        **_server_side(before, after),
    }


if __name__ == "__main__":
    _client_process(json.loads(sys.argv[1]))
