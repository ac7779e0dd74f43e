"""错误答案：decode 时把"提示 + 已生成的全部 token"再送一遍——模型（KV 池）里的历史重复了。"""

from __future__ import annotations


def greedy_generate(
    model, prompts: list[list[int]], max_new_tokens: int, stop_ids: frozenset[int] = frozenset()
) -> list[list[int]]:
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("空的提示")
    outputs: list[list[int]] = [[] for _ in prompts]
    batch = [(i, list(p)) for i, p in enumerate(prompts)]
    while batch:
        rows = model.forward(batch)
        running = []
        for (i, _), row in zip(batch, rows):
            token = row.index(max(row))
            outputs[i].append(token)
            if len(outputs[i]) < max_new_tokens and token not in stop_ids:
                running.append((i, list(prompts[i]) + outputs[i]))  # 错在这里：应当只送 [token]
        batch = running
    return outputs
