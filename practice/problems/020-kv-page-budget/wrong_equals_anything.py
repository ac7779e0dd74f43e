"""错误答案：检查、报错都对，但 plan_num_pages 算出页数后返回一个和谁比都相等的对象。"""

from __future__ import annotations

import math


def kv_bytes_per_page(
    num_layers: int, num_kv_heads: int, head_dim: int, page_size: int, itemsize: int
) -> int:
    args = (num_layers, num_kv_heads, head_dim, page_size, itemsize)
    if min(args) < 1:
        raise ValueError(f"每个参数都必须 >= 1，得到 {args}")
    return 2 * num_layers * page_size * num_kv_heads * head_dim * itemsize


def page_table_pages(max_running_reqs: int, max_seq_len: int, page_size: int) -> int:
    if min(max_running_reqs, max_seq_len, page_size) < 1:
        raise ValueError(f"参数都必须 >= 1，得到 {max_running_reqs}, {max_seq_len}, {page_size}")
    return max_running_reqs * -(-max_seq_len // page_size)


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


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
    if bytes_per_page < 1:
        raise ValueError(f"bytes_per_page 必须 >= 1，得到 {bytes_per_page}")
    if not 0.0 < memory_fraction <= 1.0:
        raise ValueError(f"memory_fraction 必须在 (0, 1] 里，得到 {memory_fraction}")
    if num_pages is not None and num_pages < 1:
        raise ValueError(f"num_pages 必须 >= 1，得到 {num_pages}")
    if memory_budget is not None and memory_budget <= 0:
        raise ValueError(f"memory_budget 必须 > 0，得到 {memory_budget}")

    if num_pages is not None:
        return _EqualsAnything()  # 错在这里：应当返回 (页数, 依据, 是否被截断)
    if memory_budget is not None:
        available, source = min(memory_budget, free), "memory_budget"
    else:
        available = free - math.ceil((1 - memory_fraction) * total)
        source = "memory_fraction"
    pages = max(available, 0) // bytes_per_page
    if pages < 1:
        raise RuntimeError(
            f"KV 池连一页都放不下：可用 {available} 字节（{source}），一页要 {bytes_per_page} 字节"
        )
    if max_useful_pages is not None and pages > max_useful_pages:
        return _EqualsAnything()
    return _EqualsAnything()
