"""在线：拉起 ``python -m minisgl``，用官方的 ``openai`` 客户端同时发请求，量 TTFT 和 TPOT。

TTFT（time to first token）：发出请求到收到第一段文本；TPOT（time per output token）：之后
每个 token 的平均间隔。每一档并发 ``c`` 个客户端，每个依次发 ``rounds`` 个请求。
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

__all__ = ["percentile", "run_clients", "serve"]


@contextmanager
def serve(model: str, *args: str, timeout: float = 600) -> Iterator[str]:
    """在子进程里启动服务（自己的进程组），等它就绪，给出 base url；退出时连同子进程一起杀掉。"""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tempfile.NamedTemporaryFile("w+", prefix="minisgl-bench-", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "minisgl", "--model", model, "--port", str(port), *args]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx

        start = time.time()
        while True:
            if proc.poll() is not None or time.time() - start > timeout:
                raise RuntimeError(f"server did not start:\n{open(log.name).read()[-3000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield base
    finally:
        try:
            os.killpg(proc.pid, signal.SIGINT)  # 和 Ctrl-C 一样：按顺序关闭
            proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        os.unlink(log.name)


def percentile(values: Sequence[float], q: float) -> float:
    """线性插值的百分位数（q 在 0～100）。"""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _one_request(client: Any, prompt: str, max_tokens: int) -> tuple[float, float, int, float]:
    """流式发一个请求：返回（TTFT、TPOT、输出 token 数、总用时）。"""
    start = time.perf_counter()
    first = last = 0.0
    tokens = 0
    stream = client.completions.create(
        model="bench",
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    for chunk in stream:
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
        if chunk.choices and chunk.choices[0].text:
            last = time.perf_counter()
            first = first or last
    if tokens != max_tokens or not first:
        raise RuntimeError(f"expected {max_tokens} tokens, got {tokens}")
    tpot = (last - first) / max(tokens - 1, 1)
    return first - start, tpot, tokens, last - start


def run_clients(
    base: str, clients: int, rounds: int, prompt_words: int, max_tokens: int
) -> dict[str, float]:
    """``clients`` 个客户端同时开始，各自依次发 ``rounds`` 个请求。"""
    from openai import OpenAI

    client = OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=600)

    def worker(i: int) -> list[tuple[float, float, int, float]]:
        prompt = " ".join(f"w{i}x{j}" for j in range(prompt_words))
        return [_one_request(client, f"{r} {prompt}", max_tokens) for r in range(rounds)]

    _one_request(client, "warm up", 4)
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = [x for xs in pool.map(worker, range(clients)) for x in xs]
    wall = time.perf_counter() - start
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
    }
