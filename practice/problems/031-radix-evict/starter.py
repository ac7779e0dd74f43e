"""练习 031：radix cache 的 LRU 淘汰，以及"每一页恰好在一个地方"的完整性检查。"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    """radix 树的一个节点（已经写好，不要改）。根节点的 key 和 pages 都是空的。"""

    key: list[int] = field(default_factory=list)  # token id，长度是 page_size 的倍数
    pages: list[int] = field(default_factory=list)  # 这段 token 的 K/V 所在的页
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)  # 第一页 → 孩子
    lock_ref: int = 0  # 有几个请求锁着经过这个节点的前缀
    last_access: int = 0  # 最近一次被用到的时间，越大越近


def evict(root: Node, n_pages: int) -> list[int]:
    """按 LRU 淘汰没锁的叶子，直到腾出至少 n_pages 页；返回淘汰出来的页（按淘汰顺序）。

    叶子被删掉后父节点可能成为新的叶子。能淘汰的页不够时抛 ValueError，树不变。
    """
    raise NotImplementedError("在这里实现 evict")


def check_integrity(
    root: Node, free_pages: list[int], in_use: list[int], num_pages: int
) -> list[int]:
    """返回出问题的页（升序、不重复）：在空闲页表、树、in_use 里一共出现次数不是 1 的页，
    以及超出 0 .. num_pages - 1 却出现了的页。"""
    raise NotImplementedError("在这里实现 check_integrity")
