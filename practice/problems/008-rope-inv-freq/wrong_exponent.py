"""错误答案：指数写成了 i / rotary_dim（少了 2），频率衰减得太慢。"""

from __future__ import annotations

import math


def inv_freq(rotary_dim: int, base: float, scaling: dict | None = None) -> list[float]:
    if rotary_dim <= 0 or rotary_dim % 2:
        raise ValueError(f"rotary_dim 必须是正偶数，得到 {rotary_dim}")
    if base <= 1:
        raise ValueError(f"base 必须大于 1，得到 {base}")
    freqs = [1.0 / base ** (i / rotary_dim) for i in range(rotary_dim // 2)]  # 错在这里
    kind = "default" if scaling is None else scaling.get("rope_type", "default")
    if kind == "default":
        return freqs
    if kind == "linear":
        return [f / scaling["factor"] for f in freqs]
    if kind != "llama3":
        raise ValueError(f"不支持的 rope_type: {kind!r}")
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    orig = scaling["original_max_position_embeddings"]
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < orig / high:
            out.append(f)
        elif wavelen > orig / low:
            out.append(f / factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return out
