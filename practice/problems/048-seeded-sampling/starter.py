"""练习 048：带 seed 的采样——逆变换抽样与批次无关的随机数。"""

from __future__ import annotations

import random
from collections.abc import Sequence


def seeded_uniform(seed: int, position: int) -> float:
    """[0, 1) 里的一个数，只由 (seed, position) 决定。已经写好，不要改。"""
    return random.Random(f"{seed}:{position}").random()


def sample_index(weights: Sequence[float], u: float) -> int:
    """逆变换抽样：第一个满足 前缀和 > u × total 的下标。"""
    raise NotImplementedError("在这里实现 sample_index")


def sample_batch(
    rows: Sequence[Sequence[float]],
    seeds: Sequence[int | None],
    positions: Sequence[int],
    rng: random.Random,
) -> list[int]:
    """每一行采样一个下标：带 seed 的行用 seeded_uniform，其余按顺序从 rng 取数。"""
    raise NotImplementedError("在这里实现 sample_batch")
