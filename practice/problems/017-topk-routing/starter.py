"""练习 017：MoE 路由——softmax、top-k 与重新归一化。"""

from __future__ import annotations


def route(logits: list[float], k: int, renormalize: bool) -> list[tuple[int, float]]:
    """一个 token 的 E 个打分 → k 个 (专家编号, 权重)，权重从大到小，并列时编号小的在前。

    softmax 要数值稳定；renormalize 时把 k 个概率除以它们的和；
    logits 为空或 k 不在 [1, E] 里时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 route")


def expert_load(routes: list[list[tuple[int, float]]], num_experts: int) -> list[int]:
    """每个专家分到几个 token；编号越界时抛 ValueError。"""
    raise NotImplementedError("在这里实现 expert_load")
