"""旋转位置编码（RoPE）：逆频率表、cos/sin 缓存，以及三种长上下文缩放。

RoPE 把每个头的向量看成 ``rotary_dim / 2`` 对坐标，第 i 对在位置 p 上转过角度 ``p * inv_freq[i]``，
其中 ``inv_freq[i] = base ** (-2i / rotary_dim)``：前面的维度转得快（高频），后面的转得慢（低频）。
q、k 都转过之后，``q·k`` 只依赖两者的位置差——这就是"相对位置"的由来。

角度只和位置有关，所以 ``cos``、``sin`` 可以对 ``0 .. max_position-1`` 预先算好存成一张表，
推理时按 ``positions`` 取行。长上下文模型在 config.json 里写一个 ``rope_scaling``，改的只是
``inv_freq``（以及 yarn 的一个整体缩放），表的用法不变。本文件支持：

- ``default``：原始 RoPE；
- ``linear``：所有频率除以 ``factor``（位置插值）；
- ``llama3``：高频不动、低频除以 ``factor``、中间平滑过渡（Llama 3.1 起）；
- ``yarn``：按维度在"外推"和"插值"之间线性过渡，另外把 cos/sin 整体乘一个注意力系数。

公式与 transformers 的 ``ROPE_INIT_FUNCTIONS`` 一致，测试逐项对照。
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Mapping

import torch

from minisgl.kernel import apply_rope_inplace

from .base import BaseOP

if TYPE_CHECKING:
    from minisgl.models.config import RotaryConfig

__all__ = ["RotaryEmbedding", "get_rope", "rope_inv_freq"]

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def rope_inv_freq(
    rotary_dim: int,
    base: float,
    scaling: Mapping[str, Any] | None = None,
    max_position: int | None = None,
) -> tuple[torch.Tensor, float]:
    """``(inv_freq, attention_factor)``：``rotary_dim / 2`` 个逆频率（float32，CPU），以及 cos/sin
    要整体乘上的系数（只有 yarn 不是 1）。``max_position`` 只在 yarn 没写 ``factor`` 时用到。"""
    inv_freq = 1.0 / _powers(rotary_dim, base)
    if scaling is None:
        return inv_freq, 1.0
    kind = scaling.get("rope_type", scaling.get("type", "default"))  # "type" 是旧的写法
    if kind == "default":
        return inv_freq, 1.0
    if kind == "linear":
        return inv_freq / scaling["factor"], 1.0
    if kind == "llama3":
        return _llama3(inv_freq, scaling, max_position), 1.0
    if kind == "yarn":
        return _yarn(rotary_dim, base, scaling, max_position)
    raise ValueError(
        f"unsupported rope_type {kind!r}; supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
    )


def _powers(rotary_dim: int, base: float) -> torch.Tensor:
    """``base ** (2i / rotary_dim)``，i = 0 .. rotary_dim/2 - 1：每一对维度转一弧度要走的位置数。"""
    # 显式指定 device 和 dtype：第 5 章在 meta 设备、bf16 默认精度下建模型，这张表不能跟着变
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device="cpu").float() / rotary_dim
    return base**exponents


def _original_max_position(scaling: Mapping[str, Any], max_position: int | None) -> int:
    orig = scaling.get("original_max_position_embeddings", max_position)
    if orig is None:
        raise ValueError(f"rope scaling {dict(scaling)} needs original_max_position_embeddings")
    return int(orig)


def _llama3(
    inv_freq: torch.Tensor, scaling: Mapping[str, Any], max_position: int | None
) -> torch.Tensor:
    """按波长分三段：短于 ``orig / high_freq_factor`` 的（高频）不动；
    长于 ``orig / low_freq_factor`` 的（低频）除以 ``factor``；
    中间一段按 ``orig / 波长`` 在两者之间线性过渡。"""
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    orig = _original_max_position(scaling, max_position)
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > orig / low, inv_freq / factor, inv_freq)
    if high == low:  # 没有过渡段
        return scaled
    smooth = (orig / wavelen - low) / (high - low)  # 0 = 全部除以 factor，1 = 保持原频率
    smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    medium = (wavelen >= orig / high) & (wavelen <= orig / low)
    return torch.where(medium, smoothed, scaled)


def _yarn(
    rotary_dim: int,
    base: float,
    scaling: Mapping[str, Any],
    max_position: int | None,
) -> tuple[torch.Tensor, float]:
    """YaRN：在原始上下文里转圈多（> beta_fast 圈）的维度保持原频率（外推），转圈少
    （< beta_slow 圈）的维度除以 ``factor``（插值），中间的维度按下标线性过渡。"""
    orig = _original_max_position(scaling, max_position)
    factor = scaling.get("factor")
    if factor is None:  # DeepSeek 式的写法：由两个长度之比推出
        if max_position is None:
            raise ValueError("yarn scaling without 'factor' needs max_position")
        factor = max_position / orig
    beta_fast = scaling.get("beta_fast") or 32
    beta_slow = scaling.get("beta_slow") or 1

    def dim_of(num_rotations: float) -> float:
        """在原始上下文里恰好转 ``num_rotations`` 圈的那一维（可以是小数）。"""
        return rotary_dim * math.log(orig / (num_rotations * 2 * math.pi)) / (2 * math.log(base))

    lo, hi = dim_of(beta_fast), dim_of(beta_slow)
    if scaling.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, rotary_dim - 1)
    if lo == hi:
        hi += 0.001  # 避免除以 0
    index = torch.arange(rotary_dim // 2, dtype=torch.float32, device="cpu")
    ramp = ((index - lo) / (hi - lo)).clamp(0, 1)
    keep = 1 - ramp  # 外推的权重：1 = 保持原频率，0 = 除以 factor
    powers = _powers(rotary_dim, base)
    extrapolation, interpolation = 1.0 / powers, 1.0 / (factor * powers)
    scaled = interpolation * (1 - keep) + extrapolation * keep

    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:

        def mscale(scale: float, m: float = 1.0) -> float:
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        m, m_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if m and m_all:
            attention_factor = mscale(factor, m) / mscale(factor, m_all)
        else:
            attention_factor = mscale(factor)
    return scaled, float(attention_factor)


class RotaryEmbedding(BaseOP):
    """持有 cos/sin 缓存，对 q、k 原地施加 RoPE。没有权重：缓存以下划线开头，不进状态字典。"""

    def __init__(
        self,
        head_dim: int,
        rotary_dim: int,
        max_position: int,
        base: float,
        scaling: Mapping[str, Any] | None = None,
    ) -> None:
        if rotary_dim % 2 or not 0 < rotary_dim <= head_dim:
            raise ValueError(
                f"rotary_dim must be even and in (0, head_dim={head_dim}], got {rotary_dim}"
            )
        self.head_dim = head_dim
        self.rotary_dim = rotary_dim
        self.max_position = max_position
        inv_freq, attention_factor = rope_inv_freq(rotary_dim, base, scaling, max_position)
        t = torch.arange(max_position, dtype=torch.float32, device="cpu")
        freqs = torch.outer(t, inv_freq)  # (max_position, rotary_dim / 2)：第 p 行是位置 p 的角度
        # 一行 = [cos 的一半, sin 的一半]，和 FlashInfer 的 cos_sin_cache 同一个布局
        self._cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1) * attention_factor

    @property
    def cos_sin_cache(self) -> torch.Tensor:
        return self._cos_sin_cache

    def table_on(self, device: torch.device) -> torch.Tensor:
        """``device`` 上的 cos/sin 表。表建在 CPU 上（建模型时可能在 meta 设备上），第一次用时
        搬到计算设备，之后常驻。"""
        if self._cos_sin_cache.device != device:
            self._cos_sin_cache = self._cos_sin_cache.to(device)
        return self._cos_sin_cache

    def forward(
        self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """原地旋转 ``q``、``k``（形状见 ``kernel.apply_rope_inplace``），返回它们本身。"""
        apply_rope_inplace(positions, q, k, self.table_on(positions.device), self.head_dim)
        return q, k


def _freeze(value: Any) -> Any:
    """把 dict / list 变成可哈希的元组，用作缓存的键。"""
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


@functools.cache
def _cached_rope(
    head_dim: int, rotary_dim: int, max_position: int, base: float, frozen: Any
) -> RotaryEmbedding:
    scaling = None if frozen is None else {k: v for k, v in frozen}
    return RotaryEmbedding(head_dim, rotary_dim, max_position, base, scaling)


def get_rope(config: RotaryConfig) -> RotaryEmbedding:
    """按配置取一个 ``RotaryEmbedding``。参数相同的配置共享同一个对象：
    一个模型的几十层只存一张 cos/sin 表。"""
    scaling = None if config.scaling is None else _freeze(config.scaling)
    return _cached_rope(
        config.head_dim, config.rotary_dim, config.max_position, float(config.base), scaling
    )
