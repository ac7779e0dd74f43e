"""错误答案：队头进不来就跳过它、看下一个——短请求插队，长请求可能永远等下去。"""

from __future__ import annotations


def pages_needed(num_tokens: int, page_size: int) -> int:
    if page_size < 1 or num_tokens < 0:
        raise ValueError(f"需要 page_size >= 1、num_tokens >= 0，得到 {page_size}, {num_tokens}")
    return -(-num_tokens // page_size)


def admit_prefill(
    pending: list[tuple[int, int, int]],
    running: list[tuple[int, int]],
    free_rows: int,
    available_pages: int,
    page_size: int,
    max_extend_tokens: int,
) -> tuple[list[int], int]:
    if page_size < 1 or max_extend_tokens < 1:
        raise ValueError(
            f"需要 page_size、max_extend_tokens >= 1，得到 {page_size}, {max_extend_tokens}"
        )
    reserved = 0
    for max_device_len, pages_held in running:
        owed = pages_needed(max_device_len, page_size) - pages_held
        if owed < 0:
            raise ValueError(f"最长 {max_device_len} 个 token 的请求不该拿着 {pages_held} 页")
        reserved += owed  # 这些页还在空闲列表里，但已经许给了运行中的请求

    admitted: list[int] = []
    budget = max_extend_tokens
    for uid, prompt_len, output_len in pending:
        need = pages_needed(prompt_len + output_len, page_size)
        if free_rows == 0 or need > available_pages - reserved:
            continue  # 错在这里：应当停下，不能插队
        if admitted and prompt_len > budget:
            continue  # 错在这里：同上
        admitted.append(uid)
        free_rows -= 1
        reserved += need  # 它一页还没分到，要预留全部
        budget = max(0, budget - prompt_len)
    return admitted, budget
