"""练习 057：屋顶线——一批 decode 最快要多久。"""

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
    raise NotImplementedError("在这里实现 step_floor")


def decode_schedule(requests: Sequence[tuple[int, int]], max_batch: int) -> list[tuple[int, int]]:
    """连续批处理下每一步的 (请求数, 读的 KV token 总数)。"""
    raise NotImplementedError("在这里实现 decode_schedule")


def decode_floor(roof: Roof, requests: Sequence[tuple[int, int]], max_batch: int) -> float:
    """每一步的下限加起来。"""
    raise NotImplementedError("在这里实现 decode_floor")
