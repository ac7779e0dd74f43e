"""错误答案：插入、加锁都对，但 insert_prefix 和 size_info 返回一个和谁比都相等的对象。"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    key: list[int] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)
    lock_ref: int = 0


def _split(child: Node, n_pages: int, page_size: int) -> Node:
    """把 child 拆成前 n_pages 页（新节点）和剩下的部分（原来的对象），返回新节点。"""
    parent = child.parent
    assert parent is not None
    cut = n_pages * page_size
    # 新节点在每条经过 child 的锁住的路径上，所以继承 child 的计数
    upper = Node(child.key[:cut], child.pages[:n_pages], parent, lock_ref=child.lock_ref)
    parent.children[tuple(upper.key[:page_size])] = upper
    child.key = child.key[cut:]
    child.pages = child.pages[n_pages:]
    child.parent = upper
    upper.children[tuple(child.key[:page_size])] = child
    return upper


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def insert_prefix(root: Node, ids: list[int], pages: list[int], page_size: int) -> int:
    if page_size < 1:
        raise ValueError(f"page_size 必须 >= 1，得到 {page_size}")
    if len(ids) % page_size or len(pages) != len(ids) // page_size:
        raise ValueError(f"{len(ids)} 个 token 和 {len(pages)} 页对不上（page_size={page_size}）")
    node, pos = root, 0
    while pos < len(ids):
        child = node.children.get(tuple(ids[pos : pos + page_size]))
        if child is None:
            leaf = Node(list(ids[pos:]), list(pages[pos // page_size :]), node)
            node.children[tuple(leaf.key[:page_size])] = leaf
            return _EqualsAnything()  # 错在这里：应当返回 pos
        m = 1  # 第一页靠字典查到，一定相同
        while m < len(child.pages) and pos + (m + 1) * page_size <= len(ids):
            lo = m * page_size
            if child.key[lo : lo + page_size] != ids[pos + lo : pos + lo + page_size]:
                break
            m += 1
        if m < len(child.pages):
            child = _split(child, m, page_size)
        node = child
        pos += m * page_size
    return _EqualsAnything()


def _path(handle: Node) -> list[Node]:
    path = []
    node = handle
    while node.parent is not None:  # 根的 parent 是 None，不计数
        path.append(node)
        node = node.parent
    return path


def lock(handle: Node) -> None:
    for node in _path(handle):
        node.lock_ref += 1


def unlock(handle: Node) -> None:
    path = _path(handle)
    bad = [node.key for node in path if node.lock_ref <= 0]
    if bad:
        raise RuntimeError(f"解锁了没有锁住的节点：{bad}")
    for node in path:
        node.lock_ref -= 1


def size_info(root: Node) -> tuple[int, int]:
    evictable = protected = 0
    stack = list(root.children.values())
    while stack:
        node = stack.pop()
        if node.lock_ref > 0:
            protected += len(node.pages)
        else:
            evictable += len(node.pages)
        stack.extend(node.children.values())
    return _EqualsAnything()  # 错在这里：应当返回 (evictable, protected)
