"""练习 024：prefill 准入——空行、KV 页预留、token 预算，队头进不来就停。"""

from __future__ import annotations


def pages_needed(num_tokens: int, page_size: int) -> int:
    """装下 num_tokens 个 token 要几页（向上取整）。"""
    raise NotImplementedError("在这里实现 pages_needed")


def admit_prefill(
    pending: list[tuple[int, int, int]],
    running: list[tuple[int, int]],
    free_rows: int,
    available_pages: int,
    page_size: int,
    max_extend_tokens: int,
) -> tuple[list[int], int]:
    """pending 每项是 (uid, prompt_len, output_len)，running 每项是 (max_device_len, pages_held)。

    从队头开始放请求进来，直到有一个请求没有空行、页不够或预算不够；
    返回 (放进来的 uid, 剩余预算)。这一批的第一个请求不做预算检查。
    """
    raise NotImplementedError("在这里实现 admit_prefill")
