"""错误答案：拿 u 直接和前缀和比，不乘 total；越界时取最后一个 token。

权重没有归一化时分布完全不对；概率的和略小于 1 时，越界会选中最后一个（可能权重为 0 的）token。
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Sequence


def seeded_uniform(seed: int, position: int) -> float:
    """[0, 1) 里的一个数，只由 (seed, position) 决定。已经写好，不要改。"""
    return random.Random(f"{seed}:{position}").random()


def sample_index(weights: Sequence[float], u: float) -> int:
    if not weights:
        raise ValueError("weights must not be empty")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError(f"weights must be finite and >= 0, got {list(weights)}")
    if not 0.0 <= u < 1.0:
        raise ValueError(f"u must be in [0, 1), got {u}")
    cdf = list(itertools.accumulate(weights))
    total = cdf[-1]
    if total <= 0:
        raise ValueError("the weights sum to 0")
    # 第一个前缀和严格大于目标的位置：目标恰好在段的边界上时选右边那段，
    # 权重为 0 的 token（前缀和的平台）永远不会被选中
    return min(bisect.bisect_right(cdf, u), len(cdf) - 1)  # 错在这里：没有乘 total


def sample_batch(
    rows: Sequence[Sequence[float]],
    seeds: Sequence[int | None],
    positions: Sequence[int],
    rng: random.Random,
) -> list[int]:
    if not len(rows) == len(seeds) == len(positions):
        raise ValueError("rows, seeds and positions must have the same length")
    out = []
    for weights, seed, position in zip(rows, seeds, positions):
        u = rng.random() if seed is None else seeded_uniform(seed, position)
        out.append(sample_index(weights, u))
    return out
