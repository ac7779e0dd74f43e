"""错误答案：准入都对，但返回一个和谁比都相等的对象，而不是 (uid 列表, 剩余预算)。"""

from __future__ import annotations


def pages_needed(num_tokens: int, page_size: int) -> int:
    if page_size < 1 or num_tokens < 0:
        raise ValueError(f"需要 page_size >= 1、num_tokens >= 0，得到 {page_size}, {num_tokens}")
    return -(-num_tokens // page_size)


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


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
            break  # 队头阻塞：后面的请求不能插队
        if admitted and prompt_len > budget:
            break  # 第一个请求不查预算，否则长提示永远进不来
        admitted.append(uid)
        free_rows -= 1
        reserved += need  # 它一页还没分到，要预留全部
        budget = max(0, budget - prompt_len)
    return _EqualsAnything()  # 错在这里：应当返回 (admitted, budget)
