"""练习 015：和参照答案逐步对照 logits 与贪心 token，遇到 near-tie 停下。"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Comparison:
    compared: int  # 比较过而且相同的 token 数
    max_diff: float  # 比较过的每一步里 logits 的最大绝对误差
    stop: str  # "end" | "near_tie" | "mismatch"
    step: int  # 停在第几步；stop == "end" 时是比较的总步数


def compare_greedy(
    our_tokens: list[int],
    our_logits: list[list[float]],
    ref_logits: list[list[float]],
    threshold: float = 1e-3,
) -> Comparison:
    """逐步比较；参照答案第一名领先第二名不超过 threshold 时停下（near_tie）。"""
    raise NotImplementedError("在这里实现 compare_greedy")
