"""参考答案：贪心生成循环。"""

from __future__ import annotations


def _argmax(row: list[float]) -> int:
    best = 0
    for v in range(1, len(row)):
        if row[v] > row[best]:  # 严格大于：一样大时留下前面的（下标小的）
            best = v
    return best


def greedy_generate(
    model, prompts: list[list[int]], max_new_tokens: int, stop_ids: frozenset[int] = frozenset()
) -> list[list[int]]:
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens 必须 >= 1，得到 {max_new_tokens}")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("至少要有一段提示，而且每段提示至少 1 个 token")
    outputs: list[list[int]] = [[] for _ in prompts]
    batch = [(i, list(p)) for i, p in enumerate(prompts)]  # prefill：整段提示
    while batch:
        rows = model.forward(batch)
        running = []
        for (i, _), row in zip(batch, rows):
            token = _argmax(row)
            outputs[i].append(token)
            if len(outputs[i]) < max_new_tokens and token not in stop_ids:
                running.append((i, [token]))  # decode：只送刚生成的这一个
        batch = running
    return outputs
