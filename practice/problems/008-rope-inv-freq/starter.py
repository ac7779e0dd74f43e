"""练习 008：RoPE 的逆频率表与 llama3 缩放。"""

from __future__ import annotations

import math  # noqa: F401  （llama3 缩放要用 math.pi）


def inv_freq(rotary_dim: int, base: float, scaling: dict | None = None) -> list[float]:
    """长度 rotary_dim // 2 的逆频率表：inv_freq[i] = 1 / base ** (2i / rotary_dim)。

    - rotary_dim 必须是正偶数、base 必须大于 1，否则 ValueError；
    - scaling 为 None 或 rope_type 为 "default"（没有这个键也算）：原始表；
    - "linear"：每一项除以 scaling["factor"]；
    - "llama3"：按波长 2π / f 分三段（见题面）；
    - 其他 rope_type：ValueError，信息里带上这个名字。
    """
    raise NotImplementedError("在这里实现 inv_freq")
