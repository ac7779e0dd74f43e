"""练习 014：贪心生成循环的记账——prefill 一次，decode 每步每个请求只送 1 个 token。"""

from __future__ import annotations


def greedy_generate(
    model, prompts: list[list[int]], max_new_tokens: int, stop_ids: frozenset[int] = frozenset()
) -> list[list[int]]:
    """返回每段提示生成的 token。

    第一次 model.forward 送进全部提示；之后每次只送没结束的请求各自上一步生成的 1 个 token。
    取 logits 最大的下标（一样大取最小的）；生成够 max_new_tokens 个或生成了停止符（算在输出里）
    就结束。参数不合法时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 greedy_generate")
