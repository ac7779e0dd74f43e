"""031 的可见测试。"""

from solution import Node, check_integrity, evict


def add(parent, key, pages, last_access=0, lock_ref=0):
    node = Node(list(key), list(pages), parent=parent, lock_ref=lock_ref, last_access=last_access)
    parent.children[tuple(key[:2])] = node  # 这些测试里 page_size = 2
    return node


def example():
    root = Node()
    a = add(root, [1, 2], [4], last_access=5, lock_ref=1)
    add(a, [3, 4], [6], last_access=2)
    add(a, [5, 6], [7, 8], last_access=9, lock_ref=1)
    add(root, [7, 8], [1], last_access=3)
    return root


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__} 应当抛出 ValueError，实际返回了 {value!r}")


def test_example_integrity():
    assert check_integrity(example(), [0, 2, 3, 5], [9], 10) == []


def test_example_evictions():
    root = example()
    assert evict(root, 1) == [6]
    assert evict(root, 1) == [1]
    _raises_value_error(evict, root, 1)
    assert list(root.children) == [(1, 2)]
    assert list(root.children[(1, 2)].children) == [(5, 6)]


def test_example_lost_page():
    root = example()
    evict(root, 2)
    assert check_integrity(root, [0, 2, 3, 5, 6], [9], 10) == [1]
    assert check_integrity(root, [0, 2, 3, 5, 6, 1], [9], 10) == []
