"""练习 020：KV 池开多大——每页字节数、页表上限与页数预算。"""

from __future__ import annotations


def kv_bytes_per_page(
    num_layers: int, num_kv_heads: int, head_dim: int, page_size: int, itemsize: int
) -> int:
    """一页 KV 的字节数：2 × 层数 × 页大小 × KV 头数 × head_dim × 每个数的字节数。

    任何一个参数小于 1 时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 kv_bytes_per_page")


def page_table_pages(max_running_reqs: int, max_seq_len: int, page_size: int) -> int:
    """页表最多用得到的页数：max_running_reqs × ceil(max_seq_len / page_size)。

    任何一个参数小于 1 时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 page_table_pages")


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
    """返回 (页数, 依据, 是否被截断)。优先级：num_pages > memory_budget > memory_fraction。

    参数不合法时抛 ValueError；算出来不到 1 页时抛 RuntimeError。
    """
    raise NotImplementedError("在这里实现 plan_num_pages")
