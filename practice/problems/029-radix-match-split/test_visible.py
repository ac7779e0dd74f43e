"""029 的可见测试。"""

from solution import Node, match_prefix


def build(spec, page_size, parent=None):
    """spec 是 [(key, pages, 孩子的 spec), ...]，返回根节点（parent 为 None 时新建根）。"""
    root = parent if parent is not None else Node()
    for key, pages, children in spec:
        node = Node(list(key), list(pages), parent=root)
        root.children[tuple(key[:page_size])] = node
        build(children, page_size, node)
    return root


def dump(node):
    """树的形状：[(key, pages, 孩子), ...]，孩子按 key 排序。"""
    return sorted((c.key, c.pages, dump(c)) for c in node.children.values())


def example():
    return build([([1, 2, 3, 4, 5, 6], [10, 11, 12], [([7, 8], [13], [])])], 2)


def test_full_match_down_two_nodes():
    root = example()
    assert match_prefix(root, [1, 2, 3, 4, 5, 6, 7, 8, 0], 2) == (8, [10, 11, 12, 13])
    assert dump(root) == dump(example())


def test_never_the_whole_prompt():
    root = example()
    assert match_prefix(root, [1, 2, 3, 4, 5, 6, 7, 8], 2) == (6, [10, 11, 12])
    assert dump(root) == dump(example())


def test_no_match():
    root = example()
    assert match_prefix(root, [9, 9, 9], 2) == (0, [])
    assert match_prefix(root, [], 2) == (0, [])
    assert dump(root) == dump(example())


def test_split_example():
    root = example()
    a = root.children[(1, 2)]
    assert match_prefix(root, [1, 2, 3, 4, 0, 0, 0], 2) == (4, [10, 11])
    assert dump(root) == [([1, 2, 3, 4], [10, 11], [([5, 6], [12], [([7, 8], [13], [])])])]
    assert (a.key, a.pages, a.parent.key) == ([5, 6], [12], [1, 2, 3, 4])
