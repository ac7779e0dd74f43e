"""030 的可见测试。"""

from solution import Node, insert_prefix, lock, size_info, unlock


def dump(node):
    """树的形状：[(key, pages, 孩子), ...]，孩子按 key 排序。"""
    return sorted((c.key, c.pages, dump(c)) for c in node.children.values())


def find(root, ids, page_size):
    """恰好在 ids 末尾结束的那个节点（测试用来拿 handle）；没有时返回 None。"""
    node, pos = root, 0
    while pos < len(ids):
        node = node.children.get(tuple(ids[pos : pos + page_size]))
        if node is None or ids[pos : pos + len(node.key)] != node.key:
            return None
        pos += len(node.key)
    return node if pos == len(ids) else None


def test_insert_example():
    root = Node()
    assert insert_prefix(root, [1, 2, 3, 4], [7, 8], 2) == 0
    assert insert_prefix(root, [1, 2, 3, 4], [5, 6], 2) == 4
    assert dump(root) == [([1, 2, 3, 4], [7, 8], [])]
    assert insert_prefix(root, [1, 2], [9], 2) == 2
    assert dump(root) == [([1, 2], [7], [([3, 4], [8], [])])]
    assert insert_prefix(root, [1, 2, 3, 5], [1, 2], 2) == 2
    assert dump(root) == [([1, 2], [7], [([3, 4], [8], []), ([3, 5], [2], [])])]
    assert size_info(root) == (3, 0)


def test_lock_and_unlock_the_path():
    root = Node()
    insert_prefix(root, [1, 2, 3, 4], [7, 8], 2)
    insert_prefix(root, [1, 2, 5, 5], [7, 9], 2)  # 拆成 [1 2] → [3 4]、[5 5]
    h = find(root, [1, 2, 5, 5], 2)
    lock(h)
    assert size_info(root) == (1, 2)  # [3 4] 的页 8 可以淘汰；7、9 受保护
    unlock(h)
    assert size_info(root) == (3, 0)


def test_split_of_a_locked_node():
    root = Node()
    assert insert_prefix(root, [1, 2, 3, 4, 5, 6], [10, 11, 12], 2) == 0
    h = find(root, [1, 2, 3, 4, 5, 6], 2)
    lock(h)
    assert insert_prefix(root, [1, 2, 3, 4, 9, 9], [20, 21, 22], 2) == 4
    assert dump(root) == [([1, 2, 3, 4], [10, 11], [([5, 6], [12], []), ([9, 9], [22], [])])]
    assert size_info(root) == (1, 3)
    unlock(h)
    assert size_info(root) == (4, 0)
