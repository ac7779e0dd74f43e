"""参考答案：RoPE 的逆频率表，支持 default、linear、llama3 三种缩放。"""

from __future__ import annotations

import math


def inv_freq(rotary_dim: int, base: float, scaling: dict | None = None) -> list[float]:
    if rotary_dim <= 0 or rotary_dim % 2:
        raise ValueError(f"rotary_dim 必须是正偶数，得到 {rotary_dim}")
    if base <= 1:
        raise ValueError(f"base 必须大于 1，得到 {base}")
    freqs = [1.0 / base ** (2 * i / rotary_dim) for i in range(rotary_dim // 2)]
    kind = "default" if scaling is None else scaling.get("rope_type", "default")
    if kind == "default":
        return freqs
    assert scaling is not None
    if kind == "linear":
        return [f / scaling["factor"] for f in freqs]
    if kind != "llama3":
        raise ValueError(f"不支持的 rope_type: {kind!r}")
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    orig = scaling["original_max_position_embeddings"]
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f  # 转一整圈要走的位置数
        if wavelen < orig / high:  # 高频：在原始上下文里转了很多圈，不用缩放
            out.append(f)
        elif wavelen > orig / low:  # 低频：原始上下文里转不满一圈，按 factor 插值
            out.append(f / factor)
        else:  # 中间：按"原始上下文里转了几圈"在两者之间线性过渡
            smooth = (orig / wavelen - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return out
