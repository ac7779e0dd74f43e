"""错误答案：max_diff 从整数 0 开始。两边 logits 完全相同时 max(0, 0.0) 留下的是 int 0。"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Comparison:
    compared: int
    max_diff: float
    stop: str
    step: int


def _top2(row: list[float]) -> tuple[int, float]:
    """(最大值的下标（并列取最小的）, 最大的两个值之差)。"""
    best = 0
    for v in range(1, len(row)):
        if row[v] > row[best]:
            best = v
    second = max(row[v] for v in range(len(row)) if v != best)
    return best, row[best] - second


def compare_greedy(
    our_tokens: list[int],
    our_logits: list[list[float]],
    ref_logits: list[list[float]],
    threshold: float = 1e-3,
) -> Comparison:
    if len(our_tokens) != len(our_logits):
        raise ValueError(f"{len(our_tokens)} 个 token 却有 {len(our_logits)} 行 logits")
    n = min(len(our_tokens), len(ref_logits))
    compared, max_diff = 0, 0  # 错在这里：应当是 0.0
    for k in range(n):
        ours, ref = our_logits[k], ref_logits[k]
        if len(ours) != len(ref) or len(ref) < 2:
            raise ValueError(f"第 {k} 步：logits 长度 {len(ours)} 和 {len(ref)}，需要相同且至少 2")
        max_diff = max(max_diff, max(abs(a - b) for a, b in zip(ours, ref)))
        best, margin = _top2(ref)
        if margin <= threshold:
            return Comparison(compared, max_diff, "near_tie", k)
        if our_tokens[k] != best:
            return Comparison(compared, max_diff, "mismatch", k)
        compared += 1
    return Comparison(compared, max_diff, "end", n)
