"""错误答案：遇到停止符的请求没有移出批次，只是丢掉它后面生成的 token——白算，还多占了批次。"""

from __future__ import annotations


def greedy_generate(
    model, prompts: list[list[int]], max_new_tokens: int, stop_ids: frozenset[int] = frozenset()
) -> list[list[int]]:
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("空的提示")
    outputs: list[list[int]] = [[] for _ in prompts]
    stopped = [False] * len(prompts)
    batch = [(i, list(p)) for i, p in enumerate(prompts)]
    for _ in range(max_new_tokens):
        rows = model.forward(batch)
        for (i, _), row in zip(batch, rows):
            token = row.index(max(row))
            if not stopped[i]:
                outputs[i].append(token)
                stopped[i] = token in stop_ids
        batch = [(i, [outputs[i][-1]]) for i in range(len(prompts))]  # 错在这里：结束的也留着
    return outputs
