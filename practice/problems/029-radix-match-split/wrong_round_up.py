"""错误答案：逐个 token 比较，再把命中的 token 数向上取整到整页——半页也算成了命中，多拆了一页。"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    key: list[int] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)


def _split(child: Node, n_pages: int, page_size: int) -> Node:
    parent = child.parent
    assert parent is not None
    cut = n_pages * page_size
    upper = Node(key=child.key[:cut], pages=child.pages[:n_pages], parent=parent)
    parent.children[tuple(upper.key[:page_size])] = upper
    child.key = child.key[cut:]
    child.pages = child.pages[n_pages:]
    child.parent = upper
    upper.children[tuple(child.key[:page_size])] = child
    return upper


def match_prefix(root: Node, ids: list[int], page_size: int) -> tuple[int, list[int]]:
    if page_size < 1:
        raise ValueError(f"page_size 必须 >= 1，得到 {page_size}")
    limit = (len(ids) - 1) // page_size * page_size if ids else 0
    node, pos, pages = root, 0, []
    while pos < limit:
        child = node.children.get(tuple(ids[pos : pos + page_size]))
        if child is None:
            break
        t = 0  # 命中的 token 数
        while t < len(child.key) and pos + t < limit and child.key[t] == ids[pos + t]:
            t += 1
        m = -(-t // page_size)  # 错在这里：半页也算一页，应当向下取整（而且要整页比较）
        pages.extend(child.pages[:m])
        pos += m * page_size
        if m < len(child.pages):
            _split(child, m, page_size)
            break
        node = child
    return pos, pages
