"""错误答案：预算没有在批次里共用——每个请求各算最多 max_extend_tokens 个，一批远超预算。"""

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
        for item in list(queue):
            uid, prompt_len, done = item
            n = min(budget, prompt_len - done)  # 错在这里：budget 从来不减
            batch.append((uid, done, done + n))
            if done + n == prompt_len:
                queue.remove(item)
            else:
                item[2] = done + n
        steps.append(batch)
    return steps
