"""错误答案：每一行都从 rng 取一个数，带 seed 的行取了不用。

带 seed 的行本身没错，但不带 seed 的行拿到的随机数取决于前面有几行带 seed。
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
    return bisect.bisect_right(cdf, u * total)


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
        shared = rng.random()  # 错在这里：带 seed 的行也取了一个数
        u = shared if seed is None else seeded_uniform(seed, position)
        out.append(sample_index(weights, u))
    return out
