"""错误答案：停止符没有算在输出里。"""

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
            if token in stop_ids:
                continue  # 错在这里：停止符也应当记进输出
            outputs[i].append(token)
            if len(outputs[i]) < max_new_tokens:
                running.append((i, [token]))
        batch = running
    return outputs
