"""错误答案：第二名取的是"比第一名小的最大值"，最大值出现两次时 margin 不是 0，并列发现不了。"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Comparison:
    compared: int
    max_diff: float
    stop: str
    step: int


def compare_greedy(
    our_tokens: list[int],
    our_logits: list[list[float]],
    ref_logits: list[list[float]],
    threshold: float = 1e-3,
) -> Comparison:
    if len(our_tokens) != len(our_logits):
        raise ValueError("token 数和 logits 行数不同")
    n = min(len(our_tokens), len(ref_logits))
    compared, max_diff = 0, 0.0
    for k in range(n):
        ours, ref = our_logits[k], ref_logits[k]
        if len(ours) != len(ref) or len(ref) < 2:
            raise ValueError(f"第 {k} 步的 logits 长度不对")
        max_diff = max(max_diff, max(abs(a - b) for a, b in zip(ours, ref)))
        top = max(ref)
        best = ref.index(top)
        smaller = [x for x in ref if x < top]  # 错在这里：去掉了所有等于最大值的
        margin = top - max(smaller) if smaller else float("inf")
        if margin <= threshold:
            return Comparison(compared, max_diff, "near_tie", k)
        if our_tokens[k] != best:
            return Comparison(compared, max_diff, "mismatch", k)
        compared += 1
    return Comparison(compared, max_diff, "end", n)
