"""错误答案：遇到 near-tie 只跳过这一步，继续往后比——此后两边的前缀可能已经不同了。"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Comparison:
    compared: int
    max_diff: float
    stop: str
    step: int


def _top2(row: list[float]) -> tuple[int, float]:
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
        raise ValueError("token 数和 logits 行数不同")
    n = min(len(our_tokens), len(ref_logits))
    compared, max_diff, tie_at = 0, 0.0, -1
    for k in range(n):
        ours, ref = our_logits[k], ref_logits[k]
        if len(ours) != len(ref) or len(ref) < 2:
            raise ValueError(f"第 {k} 步的 logits 长度不对")
        max_diff = max(max_diff, max(abs(a - b) for a, b in zip(ours, ref)))
        best, margin = _top2(ref)
        if margin <= threshold:
            if tie_at < 0:
                tie_at = k
            continue  # 错在这里：应当停下
        if our_tokens[k] != best:
            return Comparison(compared, max_diff, "mismatch", k)
        compared += 1
    if tie_at >= 0:
        return Comparison(compared, max_diff, "near_tie", tie_at)
    return Comparison(compared, max_diff, "end", n)
