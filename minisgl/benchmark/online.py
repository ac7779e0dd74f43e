"""在线：拉起 ``python -m minisgl``，用官方的 ``openai`` 客户端同时发请求，量 TTFT 和 TPOT。

TTFT（time to first token）：发出请求到收到第一段文本；TPOT（time per output token）：之后
每个 token 的平均间隔。每一档并发 ``c`` 个客户端，每个依次发 ``rounds`` 个请求。
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from minisgl.server.launch import start_background_server

__all__ = ["percentile", "run_clients", "serve"]


@contextmanager
def serve(model: str, *args: str, timeout: float = 600) -> Iterator[str]:
    """在后台启动服务（第 15 章的 ``start_background_server``），给出 base url；
    结束时像 Ctrl-C 一样让它按顺序关闭，关不掉就整组杀掉。"""
    server = start_background_server(model, *args, name="minisgl-bench", timeout=timeout)
    try:
        yield server.url
    finally:
        try:
            server.stop()
        finally:
            server.kill()


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
