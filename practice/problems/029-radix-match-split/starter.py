"""练习 029：radix cache 的前缀匹配——按页对齐，匹配停在节点中间就拆开它。"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    """radix 树的一个节点（已经写好，不要改）。根节点的 key 和 pages 都是空的。"""

    key: list[int] = field(default_factory=list)  # token id，长度是 page_size 的倍数
    pages: list[int] = field(default_factory=list)  # len(key) // page_size 个页号
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)  # 第一页 → 孩子


def match_prefix(root: Node, ids: list[int], page_size: int) -> tuple[int, list[int]]:
    """返回 ids 最长的、按页对齐的缓存前缀 (matched_len, pages)。

    最多匹配 (len(ids) - 1) // page_size * page_size 个 token；匹配停在节点中间时拆开那个节点：
    新节点放前半截，原来的节点对象留下后半截。page_size < 1 时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 match_prefix")
