"""错误答案：匹配、拆分都对，但返回一个和谁比都相等的对象，而不是 (matched_len, pages)。"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    key: list[int] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)


def _split(child: Node, n_pages: int, page_size: int) -> Node:
    """把 child 拆成前 n_pages 页（新节点）和剩下的部分（原来的对象），返回新节点。"""
    parent = child.parent
    assert parent is not None
    cut = n_pages * page_size
    upper = Node(key=child.key[:cut], pages=child.pages[:n_pages], parent=parent)
    parent.children[tuple(upper.key[:page_size])] = upper  # 第一页不变，占原来的位置
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


def match_prefix(root: Node, ids: list[int], page_size: int) -> tuple[int, list[int]]:
    if page_size < 1:
        raise ValueError(f"page_size 必须 >= 1，得到 {page_size}")
    limit = (len(ids) - 1) // page_size * page_size if ids else 0
    node, pos, pages = root, 0, []
    while pos < limit:
        child = node.children.get(tuple(ids[pos : pos + page_size]))
        if child is None:
            break
        m = 0  # 命中的整页数
        while m < len(child.pages) and pos + (m + 1) * page_size <= limit:
            lo = m * page_size
            if child.key[lo : lo + page_size] != ids[pos + lo : pos + lo + page_size]:
                break
            m += 1
        pages.extend(child.pages[:m])
        pos += m * page_size
        if m < len(child.pages):
            _split(child, m, page_size)
            break
        node = child
    return _EqualsAnything()  # 错在这里：应当返回 (pos, pages)
