"""错误答案：几个 logit 一样大时取了最后一个下标（torch.argmax 取的是第一个）。"""

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
            token = max(range(len(row)), key=lambda v: (row[v], v))  # 错在这里：并列时取了大的下标
            outputs[i].append(token)
            if len(outputs[i]) < max_new_tokens and token not in stop_ids:
                running.append((i, [token]))
        batch = running
    return outputs
