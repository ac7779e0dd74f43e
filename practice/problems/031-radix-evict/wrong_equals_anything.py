"""错误答案：淘汰都对，但 check_integrity 返回一个和谁比都相等的对象，而不是有问题的页的列表。"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    key: list[int] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)
    lock_ref: int = 0
    last_access: int = 0


def _nodes(root: Node) -> list[Node]:
    """根以外的所有节点。"""
    found, stack = [], list(root.children.values())
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.children.values())
    return found


def evict(root: Node, n_pages: int) -> list[int]:
    if n_pages <= 0:
        return []
    nodes = _nodes(root)
    evictable = sum(len(n.pages) for n in nodes if n.lock_ref == 0)
    if evictable < n_pages:
        raise ValueError(f"只有 {evictable} 页能淘汰，要 {n_pages} 页")
    heap = []
    for i, node in enumerate(nodes):
        if not node.children and node.lock_ref == 0:
            heap.append((node.last_access, node.pages[0], i, node))
    heapq.heapify(heap)
    freed: list[int] = []
    count = len(nodes)  # 堆里元素的第三项只为让比较永远不落到 Node 上
    while len(freed) < n_pages:
        _, _, _, node = heapq.heappop(heap)
        parent = node.parent
        assert parent is not None
        for first, child in list(parent.children.items()):
            if child is node:
                del parent.children[first]
        node.parent = None
        freed.extend(node.pages)
        if parent.parent is not None and not parent.children and parent.lock_ref == 0:
            heapq.heappush(heap, (parent.last_access, parent.pages[0], count, parent))
            count += 1
    return freed


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def check_integrity(
    root: Node, free_pages: list[int], in_use: list[int], num_pages: int
) -> list[int]:
    counts = Counter(free_pages)
    counts.update(in_use)
    for node in _nodes(root):
        counts.update(node.pages)
    bad = {p for p in range(num_pages) if counts[p] != 1}
    bad.update(p for p in counts if not 0 <= p < num_pages)
    return _EqualsAnything()  # 错在这里：应当返回升序的页列表
