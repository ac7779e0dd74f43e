"""第 19 章：在线基准的客户端。

客户端分到几个进程里（``processes``）时，量到的应该和在一个进程里一样是"每个客户端、每一轮
一个请求，每个请求 ``max_tokens`` 个 token"：编号分段不重不漏，子进程的结果都收回来。
用内嵌的小模型真的起一个服务；不比较快慢（CPU 上的数字没有意义）。
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from minisgl.benchmark import online

CLIENTS, ROUNDS, TOKENS = 5, 2, 6


@pytest.fixture(scope="module")
def base(tiny_model: Path) -> Iterator[str]:
    with online.serve(str(tiny_model), "--max-running-requests", "8", timeout=300) as url:
        yield url


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_completion_clients_over_processes(base: str, processes: int) -> None:
    row = online.run_clients(base, CLIENTS, ROUNDS, 4, TOKENS, processes=processes)
    assert row["clients"] == CLIENTS and row["client_processes"] == processes
    assert row["requests"] == CLIENTS * ROUNDS
    # 每个请求都读满 TOKENS 个 token（不够时 _timed_stream 会报错），吞吐按全部 token 算
    assert row["output_tokens_per_s"] * row["wall_s"] == pytest.approx(CLIENTS * ROUNDS * TOKENS)
    assert row["ttft_p50_ms"] > 0 and row["latency_p50_s"] > 0
    # 服务的账目：每个请求至少走 TOKENS - 1 步 decode，前后两份账目之差不会少于这么多步；
    # 每步等 GPU 的时间是个数（CPU 上事件不用等，接近 0）
    assert row["scheduler_steps"] >= ROUNDS * (TOKENS - 1)
    assert 0 <= row["gpu_wait_ms_per_step"] < 1000


def test_chat_clients_over_processes(base: str) -> None:
    row = online.run_chat_clients(base, CLIENTS, 1, 4, TOKENS, False, processes=2)
    assert row["requests"] == CLIENTS and row["client_processes"] == 2
    read = row["tokens_read"]
    # 读到的按片段里的用量数：至少 TOKENS 个，最后一个片段可能多带几个
    assert TOKENS <= read["min"] <= read["max"] and read["sum"] >= CLIENTS * read["min"]
    # 不带 max_tokens：客户端读够了就关掉流，服务在那之前采样的一个不少，之后的白算
    assert row["tokens_sampled"] >= read["sum"]


def test_chat_with_max_tokens_samples_exactly_what_is_read(base: str) -> None:
    """带 ``max_tokens`` 时服务恰好采样这么多（prefill 出第 1 个，之后每步 1 个），一个不多：
    ``tokens_sampled`` 读的是调度器闲下来以后的计数器（``/metrics`` 的
    ``minisgl_tokens_sampled_total``）。"""
    row = online.run_chat_clients(base, CLIENTS, ROUNDS, 4, TOKENS, True)
    assert row["tokens_read"] == {"min": TOKENS, "max": TOKENS, "sum": CLIENTS * ROUNDS * TOKENS}
    assert row["tokens_sampled"] == CLIENTS * ROUNDS * TOKENS
    # 这一轮里服务现编译的 kernel 数，读自 /metrics 的 counter（没有这一项时读数就报错）
    assert isinstance(row["triton_compiles"], int) and row["triton_compiles"] >= 0
    assert row["scheduler_steps"] >= ROUNDS * (TOKENS - 1)


def test_stream_with_continuous_usage(base: str) -> None:
    """``continuous_usage_stats``：每个片段都带到那一刻为止的用量，单调不减，最后一个等于
    ``max_tokens``；文本和不带这个选项时逐字相同。"""
    client = online._client(base)
    body = {"model": "bench", "prompt": "one two three", "max_tokens": 12, "temperature": 0}
    options = {"include_usage": True, "continuous_usage_stats": True}
    chunks = list(client.completions.create(**body, stream=True, stream_options=options))
    used = [c.usage.completion_tokens for c in chunks]
    assert all(c.usage is not None for c in chunks)
    assert used == sorted(used) and used[-1] == 12
    assert all(c.usage.prompt_tokens == chunks[0].usage.prompt_tokens for c in chunks)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    plain = client.completions.create(**body, stream=True, stream_options={"include_usage": True})
    plain_chunks = list(plain)
    assert all(c.usage is None for c in plain_chunks[:-1])  # 不要这个选项：照旧只有最后一个带
    assert text == "".join(c.choices[0].text for c in plain_chunks if c.choices)
    # 对话接口：第一块只带角色、还没有 token，报的提示长度也和后面各块相同
    messages = [{"role": "user", "content": "one two three"}]
    chat = client.chat.completions.create(
        model="bench", messages=messages, max_tokens=5, stream=True, stream_options=options
    )
    usages = [(c.usage.prompt_tokens, c.usage.completion_tokens) for c in chat]
    assert usages[0] == (usages[-1][0], 0) and usages[-1][1] == 5 and usages[0][0] > 0
    assert all(prompt == usages[0][0] for prompt, _ in usages)


def test_serve_collects_compile_warnings_from_the_server_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``serve(compiled=...)`` 关闭服务之前读它的日志：调度器每次现编译写的那行警告，取出 kernel
    名和编译参数（Triton 的说明里参数表之前的那段，说明本身可能跨行）。之后照常关闭服务。"""
    from minisgl.kernel.compiles import COMPILE_WARNING

    log = (
        "[05:30:30 engine.engine] INFO    engine ready\n"
        f"[05:30:42 scheduler.scheduler] WARNING {COMPILE_WARNING}"
        "_silu_and_mul_kernel[num_warps=4, num_stages=3](X: (\n  '*bf16', 16), n: i32)\n"
        f"[05:30:50 scheduler.scheduler] WARNING {COMPILE_WARNING}_k[num_warps=2](n: i32)\n"
    )
    calls: list[str] = []

    class FakeServer:
        url = "http://127.0.0.1:1"

        def log_text(self) -> str:
            calls.append("log")
            return log

        def stop(self) -> int:
            calls.append("stop")
            return 0

        def kill(self) -> None:
            calls.append("kill")

    monkeypatch.setattr(online, "start_background_server", lambda *a, **k: FakeServer())
    compiled = ["from an earlier server"]
    with online.serve("model", compiled=compiled) as url:
        assert url == FakeServer.url
    assert compiled == [
        "from an earlier server",
        "_silu_and_mul_kernel[num_warps=4, num_stages=3]",
        "_k[num_warps=2]",
    ]
    assert calls == ["log", "stop", "kill"]
    with online.serve("model"):  # 不要的话不读日志
        pass
    assert calls[3:] == ["stop", "kill"]
