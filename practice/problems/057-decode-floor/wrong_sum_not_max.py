"""错误答案：把读的时间和算的时间加起来，而不是取大的那个。

读和算是同时进行的；相加得到的"下限"比真正能做到的还慢。
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Roof:
    """模型和设备的几个数：每步读的权重字节数、每个 token 的 KV 字节数、每个新 token 的运算量，
    内存带宽（字节/秒）和算力（次/秒）。"""

    weight_bytes: float
    kv_bytes_per_token: float
    flops_per_token: float
    bandwidth: float
    flops_per_s: float


def step_floor(roof: Roof, new_tokens: int, kv_tokens: int) -> float:
    """一步 decode 的下限秒数：读完和算完里慢的那个。"""
    if new_tokens < 1 or kv_tokens < 0:
        raise ValueError(f"bad step: new_tokens={new_tokens}, kv_tokens={kv_tokens}")
    read = roof.weight_bytes + kv_tokens * roof.kv_bytes_per_token
    return read / roof.bandwidth + new_tokens * roof.flops_per_token / roof.flops_per_s


def decode_schedule(requests: Sequence[tuple[int, int]], max_batch: int) -> list[tuple[int, int]]:
    """连续批处理下每一步的 (请求数, 读的 KV token 总数)。"""
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    for prompt_len, output_len in requests:
        if prompt_len < 1 or output_len < 1:
            raise ValueError(f"bad request ({prompt_len}, {output_len})")
    # 只有还要 decode 的请求才排队：[下一步读的 KV token 数, 还剩几步]
    pending = [[p + 1, out - 1] for p, out in requests if out > 1]
    pending.reverse()  # pop() 从队头取
    live: list[list[int]] = []
    steps: list[tuple[int, int]] = []
    while pending or live:
        while pending and len(live) < max_batch:  # 先补位
            live.append(pending.pop())
        steps.append((len(live), sum(r[0] for r in live)))  # 再走一步
        for r in live:
            r[0] += 1
            r[1] -= 1
        live = [r for r in live if r[1] > 0]  # 走完的离开，下一步开始时位置就空出来了
    return steps


def decode_floor(roof: Roof, requests: Sequence[tuple[int, int]], max_batch: int) -> float:
    """每一步的下限加起来。"""
    return sum(step_floor(roof, b, kv) for b, kv in decode_schedule(requests, max_batch))
