"""错误答案：只有一段文本时把 tpot 写成整数 0。0 == 0.0，只比 == 看不出来，但三项都应是 float。"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """线性插值的百分位数（q 在 0～100）；不改动 values；空输入或 q 越界抛 ValueError。"""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def request_metrics(
    start: float, chunk_times: Sequence[float], tokens: int
) -> tuple[float, float, float]:
    """一个请求的 (TTFT, TPOT, 总用时)。"""
    if not chunk_times:
        raise ValueError("no chunks")
    if tokens < 1:
        raise ValueError(f"tokens must be >= 1, got {tokens}")
    if chunk_times[0] < start or any(b < a for a, b in zip(chunk_times, chunk_times[1:])):
        raise ValueError("chunk times must be non-decreasing and not before start")
    first, last = chunk_times[0], chunk_times[-1]
    if len(chunk_times) == 1:
        return first - start, 0, last - start  # 错在这里：应当是 0.0
    return first - start, (last - first) / max(tokens - 1, 1), last - start


def summarize(requests: Sequence[tuple[float, Sequence[float], int]]) -> dict[str, float]:
    """所有请求的 ttft_p50、ttft_p99、tpot_p50、tpot_p99、latency_p50。"""
    if not requests:
        raise ValueError("no requests")
    metrics = [request_metrics(*r) for r in requests]
    ttft = [m[0] for m in metrics]
    tpot = [m[1] for m in metrics]
    return {
        "ttft_p50": percentile(ttft, 50),
        "ttft_p99": percentile(ttft, 99),
        "tpot_p50": percentile(tpot, 50),
        "tpot_p99": percentile(tpot, 99),
        "latency_p50": percentile([m[2] for m in metrics], 50),
    }
