"""错误答案：留出的余量按空闲量而不是总量的 (1 - fraction) 算。"""

from __future__ import annotations

import math


def kv_bytes_per_page(
    num_layers: int, num_kv_heads: int, head_dim: int, page_size: int, itemsize: int
) -> int:
    if min(num_layers, num_kv_heads, head_dim, page_size, itemsize) < 1:
        raise ValueError("参数都必须 >= 1")
    return 2 * num_layers * page_size * num_kv_heads * head_dim * itemsize


def page_table_pages(max_running_reqs: int, max_seq_len: int, page_size: int) -> int:
    if min(max_running_reqs, max_seq_len, page_size) < 1:
        raise ValueError("参数都必须 >= 1")
    return max_running_reqs * ((max_seq_len + page_size - 1) // page_size)


def plan_num_pages(
    *,
    free: int,
    total: int,
    bytes_per_page: int,
    memory_fraction: float,
    memory_budget: int | None = None,
    num_pages: int | None = None,
    max_useful_pages: int | None = None,
) -> tuple[int, str, bool]:
    if bytes_per_page < 1 or not 0.0 < memory_fraction <= 1.0:
        raise ValueError("bytes_per_page 或 memory_fraction 不合法")
    if num_pages is not None and num_pages < 1:
        raise ValueError("num_pages 不合法")
    if memory_budget is not None and memory_budget <= 0:
        raise ValueError("memory_budget 不合法")
    if num_pages is not None:
        return num_pages, "num_pages", False
    if memory_budget is not None:
        available, source = min(memory_budget, free), "memory_budget"
    else:
        available = free - math.ceil((1 - memory_fraction) * free)  # 错在这里：应当是 total
        source = "memory_fraction"
    pages = max(available, 0) // bytes_per_page
    if pages < 1:
        raise RuntimeError("内存不够")
    if max_useful_pages is not None and pages > max_useful_pages:
        return max_useful_pages, source, True
    return pages, source, False
