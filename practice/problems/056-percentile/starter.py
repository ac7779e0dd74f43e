"""练习 056：百分位数——从一组请求里读出 TTFT、TPOT 的 p50 和 p99。"""

from __future__ import annotations

from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """线性插值的百分位数（q 在 0～100）；不改动 values；空输入或 q 越界抛 ValueError。"""
    raise NotImplementedError("在这里实现 percentile")


def request_metrics(
    start: float, chunk_times: Sequence[float], tokens: int
) -> tuple[float, float, float]:
    """一个请求的 (TTFT, TPOT, 总用时)。"""
    raise NotImplementedError("在这里实现 request_metrics")


def summarize(requests: Sequence[tuple[float, Sequence[float], int]]) -> dict[str, float]:
    """所有请求的 ttft_p50、ttft_p99、tpot_p50、tpot_p99、latency_p50。"""
    raise NotImplementedError("在这里实现 summarize")
