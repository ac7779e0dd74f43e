"""参考答案：分块预填充的逐步计划。"""

from __future__ import annotations


def chunk_schedule(
    prompts: list[tuple[int, int]], max_extend_tokens: int
) -> list[list[tuple[int, int, int]]]:
    if max_extend_tokens < 1:
        raise ValueError(f"max_extend_tokens 必须 >= 1，得到 {max_extend_tokens}")
    for uid, prompt_len in prompts:
        if prompt_len < 1:
            raise ValueError(f"请求 {uid} 的提示是空的")
    # 队列里每项是 [uid, 提示长度, 已经算过的 token 数]；被分块的请求留在队头
    queue = [[uid, prompt_len, 0] for uid, prompt_len in prompts]
    steps: list[list[tuple[int, int, int]]] = []
    while queue:
        budget = max_extend_tokens  # 预算是整个批次共用的
        batch: list[tuple[int, int, int]] = []
        while queue and budget > 0:
            uid, prompt_len, done = queue[0]
            n = min(budget, prompt_len - done)
            batch.append((uid, done, done + n))
            budget -= n
            if done + n == prompt_len:
                queue.pop(0)
            else:
                queue[0][2] = done + n  # 没算完：留在队头，下一步接着算
        steps.append(batch)
    return steps
