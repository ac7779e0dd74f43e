"""030 的隐藏测试：已有的页不被替换、返回值、拆分继承 lock_ref、handle 仍然有效、
解锁两次、参数检查、随机插入。"""

import random

from solution import Node, insert_prefix, lock, size_info, unlock


def same(actual, expected):
    """类型和取值都一致才算对：type 逐层相同（list/tuple/dict 递归进去），最后才比 ==。

    只比 == 的话，返回 1 冒充 1.0、True 冒充 1，或者返回一个和谁比都相等的对象，都能蒙混过关。
    """
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(expected, dict):
        keys_match = actual.keys() == expected.keys()
        return keys_match and all(same(actual[k], expected[k]) for k in expected)
    return bool(expected == actual)


def dump(node):
    return sorted((c.key, c.pages, dump(c)) for c in node.children.values())


def find(root, ids, page_size):
    node, pos = root, 0
    while pos < len(ids):
        node = node.children.get(tuple(ids[pos : pos + page_size]))
        if node is None or ids[pos : pos + len(node.key)] != node.key:
            return None
        pos += len(node.key)
    return node if pos == len(ids) else None


def walk(root):
    stack = list(root.children.values())
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children.values())


def check_tree(root, page_size):
    for node in walk(root):
        assert (
            node.parent is not None
            and node.parent.children.get(tuple(node.key[:page_size])) is node
        )
        assert node.key and len(node.key) % page_size == 0
        assert same(len(node.pages), len(node.key) // page_size)
        assert node.lock_ref >= 0
        if node.parent is not root:
            assert node.parent.lock_ref >= node.lock_ref, "孩子的 lock_ref 比父节点还大"


def path_key(node):
    parts = []
    while node.parent is not None:
        parts = node.key + parts
        node = node.parent
    return parts


def _raises(exc_type, func, *args):
    try:
        value = func(*args)
    except exc_type:
        return
    raise AssertionError(f"{func.__name__} 应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_existing_pages_are_never_replaced():
    root = Node()
    insert_prefix(root, [1, 2, 3, 4, 5, 6], [10, 11, 12], 2)
    assert same(insert_prefix(root, [1, 2, 3, 4, 5, 6, 7, 8], [90, 91, 92, 13], 2), 6)
    assert same(dump(root), [([1, 2, 3, 4, 5, 6], [10, 11, 12], [([7, 8], [13], [])])])
    # 第一页就不同：整段都是新的
    assert same(insert_prefix(root, [1, 3, 3, 4], [30, 31], 2), 0)
    assert same(find(root, [1, 3, 3, 4], 2).pages, [30, 31])
    check_tree(root, 2)


def test_half_page_match_is_not_shared():
    root = Node()
    insert_prefix(root, [1, 2, 3, 4, 5, 6, 7, 8], [1, 2], 4)
    assert same(insert_prefix(root, [1, 2, 3, 4, 5, 6, 0, 0], [3, 4], 4), 4)
    assert same(
        dump(root), [([1, 2, 3, 4], [1], [([5, 6, 0, 0], [4], []), ([5, 6, 7, 8], [2], [])])]
    )
    check_tree(root, 4)


def test_insert_a_prefix_of_a_node_splits_it():
    root = Node()
    insert_prefix(root, [5, 5, 6, 6, 7, 7], [1, 2, 3], 2)
    big = find(root, [5, 5, 6, 6, 7, 7], 2)
    assert same(insert_prefix(root, [5, 5, 6, 6], [8, 9], 2), 4)
    h = find(root, [5, 5, 6, 6], 2)
    assert h is not None and h.pages == [1, 2]
    assert big.key == [7, 7] and big.parent is h
    assert same(insert_prefix(root, [], [], 2), 0)
    check_tree(root, 2)


def test_page_size_one_and_returns():
    root = Node()
    assert same(insert_prefix(root, [3, 1, 4, 1, 5], [0, 1, 2, 3, 4], 1), 0)
    assert same(insert_prefix(root, [3, 1, 4, 1, 6], [9, 9, 9, 9, 5], 1), 4)
    assert same(insert_prefix(root, [3, 1, 5], [9, 9, 6], 1), 2)
    assert same(insert_prefix(root, [3, 1], [9, 9], 1), 2)
    assert same(
        dump(root),
        [([3, 1], [0, 1], [([4, 1], [2, 3], [([5], [4], []), ([6], [5], [])]), ([5], [6], [])])],
    )
    assert same(size_info(root), (7, 0))
    check_tree(root, 1)


def test_split_copies_the_lock_count():
    root = Node()
    insert_prefix(root, [1, 2, 3, 4, 5, 6], [10, 11, 12], 2)
    h = find(root, [1, 2, 3, 4, 5, 6], 2)
    lock(h)
    lock(h)
    insert_prefix(root, [1, 2, 9, 9], [20, 21], 2)
    upper = find(root, [1, 2], 2)
    assert upper.lock_ref == 2 and h.lock_ref == 2
    assert same(size_info(root), (1, 3))
    check_tree(root, 2)
    unlock(h)
    assert same(size_info(root), (1, 3))
    unlock(h)
    assert same(size_info(root), (4, 0))
    assert upper.lock_ref == 0 and h.lock_ref == 0


def test_handle_stays_the_same_prefix_after_split():
    root = Node()
    insert_prefix(root, [1, 1, 2, 2, 3, 3, 4, 4], [1, 2, 3, 4], 2)
    h = find(root, [1, 1, 2, 2, 3, 3, 4, 4], 2)
    lock(h)
    insert_prefix(root, [1, 1, 2, 2, 0, 0], [7, 7, 5], 2)
    insert_prefix(root, [1, 1, 9, 9], [7, 6], 2)
    assert same(path_key(h), [1, 1, 2, 2, 3, 3, 4, 4])
    assert same(h.pages, [3, 4])
    assert same(size_info(root), (2, 4))
    unlock(h)
    assert same(size_info(root), (6, 0))
    check_tree(root, 2)


def test_two_handles_share_a_prefix():
    root = Node()
    insert_prefix(root, [1, 1, 2, 2], [1, 2], 2)
    insert_prefix(root, [1, 1, 3, 3], [9, 3], 2)
    a = find(root, [1, 1, 2, 2], 2)
    b = find(root, [1, 1, 3, 3], 2)
    shared = find(root, [1, 1], 2)
    lock(a)
    lock(b)
    assert same(shared.lock_ref, 2)
    assert same(size_info(root), (0, 3))
    unlock(a)
    assert same(size_info(root), (1, 2))
    unlock(b)
    assert same(size_info(root), (3, 0))


def test_root_handle_is_a_no_op():
    root = Node()
    insert_prefix(root, [1, 2], [4], 2)
    lock(root)
    unlock(root)
    unlock(root)
    assert same(root.lock_ref, 0)
    assert same(size_info(root), (1, 0))


def test_unlock_twice_raises_and_changes_nothing():
    root = Node()
    insert_prefix(root, [1, 1, 2, 2], [1, 2], 2)
    insert_prefix(root, [1, 1, 3, 3], [9, 3], 2)
    a = find(root, [1, 1, 2, 2], 2)
    b = find(root, [1, 1, 3, 3], 2)
    lock(a)
    lock(b)
    unlock(a)
    _raises(RuntimeError, unlock, a)
    assert same((a.lock_ref, b.lock_ref, a.parent.lock_ref), (0, 1, 1))
    assert same(size_info(root), (1, 2))


def test_bad_arguments_leave_the_tree_alone():
    root = Node()
    insert_prefix(root, [1, 2], [4], 2)
    _raises(ValueError, insert_prefix, root, [1, 2, 3], [4, 5], 2)
    _raises(ValueError, insert_prefix, root, [1, 2, 3, 4], [4], 2)
    _raises(ValueError, insert_prefix, root, [1, 2, 3, 4], [4, 5, 6], 2)
    _raises(ValueError, insert_prefix, root, [1, 2], [4, 5], 0)
    assert same(dump(root), [([1, 2], [4], [])])


def test_random_inserts_agree_with_a_flat_model():
    rng = random.Random(10)
    page_size = 2
    for _ in range(20):
        root = Node()
        cached = {}  # 第 i 页的前缀（元组）→ 页号：按页展开的"树"
        next_page = 0
        handles = []
        for _ in range(12):
            n = rng.randint(0, 5)
            ids = [rng.randint(0, 2) for _ in range(n * page_size)]
            pages = list(range(next_page, next_page + n))
            next_page += n
            want = 0
            while want < n and tuple(ids[: (want + 1) * page_size]) in cached:
                want += 1
            got = insert_prefix(root, ids, pages, page_size)
            assert same(got, want * page_size), (ids, got, want)
            for i in range(n):
                cached.setdefault(tuple(ids[: (i + 1) * page_size]), pages[i])
            h = find(root, ids, page_size)
            assert h is not None and path_key(h) == ids
            if rng.random() < 0.5:
                lock(h)
                handles.append(h)
            check_tree(root, page_size)
        tree_pages = sorted(p for node in walk(root) for p in node.pages)
        assert same(tree_pages, sorted(cached.values()))
        for h in handles:
            unlock(h)
        assert same(size_info(root), (len(cached), 0))
