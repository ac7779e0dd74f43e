"""练习 030：radix cache 的插入、加锁与页数统计。"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    """radix 树的一个节点（已经写好，不要改）。根节点的 key 和 pages 都是空的。"""

    key: list[int] = field(default_factory=list)  # token id，长度是 page_size 的倍数
    pages: list[int] = field(default_factory=list)  # len(key) // page_size 个页号
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)  # 第一页 → 孩子
    lock_ref: int = 0  # 有几个请求锁着经过这个节点的前缀


def insert_prefix(root: Node, ids: list[int], pages: list[int], page_size: int) -> int:
    """把按页对齐的 ids 和它的页插进树里，返回树里原来就有多少个 token。

    已有的部分保留树自己的页；新的部分挂成叶子，用 pages[pos // page_size:]。
    分岔点在节点中间时拆开节点（新节点放前半截并继承 lock_ref，原来的对象留下后半截）。
    参数不合法时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 insert_prefix")


def lock(handle: Node) -> None:
    """从 handle 到根（不含根）的每个节点 lock_ref 加 1。"""
    raise NotImplementedError("在这里实现 lock")


def unlock(handle: Node) -> None:
    """从 handle 到根（不含根）的每个节点 lock_ref 减 1。

    路径上有节点的 lock_ref 已经是 0 时抛 RuntimeError，什么也不改。
    """
    raise NotImplementedError("在这里实现 unlock")


def size_info(root: Node) -> tuple[int, int]:
    """返回 (evictable, protected)：没锁的节点与锁着的节点各有多少页（不含根）。"""
    raise NotImplementedError("在这里实现 size_info")
