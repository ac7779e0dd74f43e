"""练习 022：采样的候选集合——温度、top-k 与 top-p。"""

from __future__ import annotations


def candidates(probs: list[float], top_k: int, top_p: float) -> list[int]:
    """按 top-k、top-p 留下的 token 编号，按排名顺序（概率从大到小，相同时编号小的在前）。

    排名 r 的 token 留下：(top_k <= 0 或 r < top_k) 并且排在它前面的概率之和 < top_p。
    probs 为空或 top_p 不在 (0, 1] 里时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 candidates")


def sampling_probs(
    logits: list[float], temperature: float, top_k: int, top_p: float
) -> list[float]:
    """最后从中抽样的概率分布（和 logits 等长）。

    temperature <= 0 或 top_k == 1：第一名的 one-hot；否则 softmax(logits / temperature)，
    只留 candidates 里的 token 并重新归一化。logits 为空或 top_p 不合法时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 sampling_probs")
