"""031 的隐藏测试：父节点成为叶子、不淘汰内部节点和锁着的节点、至少 n 页、平局、不够时不动树、
完整性检查数次数、随机树与朴素实现对照。"""

import random

from solution import Node, check_integrity, evict


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


def add(parent, key, pages, last_access=0, lock_ref=0):
    node = Node(list(key), list(pages), parent=parent, lock_ref=lock_ref, last_access=last_access)
    parent.children[tuple(key[:2])] = node
    return node


def dump(node):
    return sorted((c.key, c.pages, c.lock_ref, dump(c)) for c in node.children.values())


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"{func.__name__} 应当抛出 ValueError，实际返回了 {value!r}")


def test_parent_becomes_a_leaf():
    root = Node()
    p = add(root, [1, 1], [10], last_access=10)
    add(p, [2, 2], [11], last_access=1)
    add(p, [3, 3], [12], last_access=2)
    add(root, [4, 4], [13], last_access=5)
    assert same(evict(root, 4), [11, 12, 13, 10])
    assert same(root.children, {})


def test_old_parent_goes_right_after_its_last_child():
    root = Node()
    p = add(root, [1, 1], [10], last_access=1)
    add(p, [2, 2], [11], last_access=8)
    add(root, [4, 4], [13], last_access=5)
    assert same(evict(root, 1), [13])
    assert same(evict(root, 2), [11, 10])
    assert same(root.children, {})


def test_internal_node_is_not_evicted_first():
    root = Node()
    p = add(root, [1, 1], [10], last_access=1)
    add(p, [2, 2], [11], last_access=9)
    add(root, [4, 4], [13], last_access=5)
    assert same(evict(root, 1), [13])
    assert same(dump(root), [([1, 1], [10], 0, [([2, 2], [11], 0, [])])])


def test_locked_leaf_is_skipped_even_if_oldest():
    root = Node()
    add(root, [1, 1], [10, 11], last_access=0, lock_ref=2)
    add(root, [2, 2], [12], last_access=7)
    add(root, [3, 3], [13], last_access=4)
    assert same(evict(root, 2), [13, 12])
    _raises_value_error(evict, root, 1)
    assert same(dump(root), [([1, 1], [10, 11], 2, [])])


def test_locked_subtree_protects_the_parent_only_while_locked():
    root = Node()
    p = add(root, [1, 1], [10], last_access=1, lock_ref=1)
    child = add(p, [2, 2], [11], last_access=2, lock_ref=1)
    add(p, [3, 3], [12], last_access=3)
    assert same(evict(root, 1), [12])
    _raises_value_error(evict, root, 1)
    child.lock_ref = 0
    p.lock_ref = 0
    assert same(evict(root, 2), [11, 10])


def test_whole_node_even_if_more_than_needed():
    root = Node()
    add(root, [1, 1, 2, 2, 3, 3], [5, 6, 7], last_access=1)
    add(root, [4, 4], [8], last_access=2)
    assert same(evict(root, 1), [5, 6, 7])
    assert same(evict(root, 0), [])
    assert same(evict(root, -3), [])
    assert same(evict(root, 1), [8])


def test_ties_go_by_first_page():
    root = Node()
    add(root, [1, 1], [9], last_access=3)
    add(root, [2, 2], [4, 0], last_access=3)
    add(root, [3, 3], [6], last_access=3)
    assert same(evict(root, 3), [4, 0, 6])
    assert same(evict(root, 1), [9])


def test_not_enough_changes_nothing():
    root = Node()
    p = add(root, [1, 1], [10], last_access=1)
    add(p, [2, 2], [11], last_access=2, lock_ref=1)
    p.lock_ref = 1
    add(root, [3, 3], [12, 13], last_access=3)
    before = dump(root)
    _raises_value_error(evict, root, 3)
    assert same(dump(root), before)
    assert same(evict(root, 2), [12, 13])


def test_integrity_counts_duplicates():
    root = Node()
    add(root, [1, 1], [0, 1])
    assert same(check_integrity(root, [2, 3], [4], 5), [])
    assert same(check_integrity(root, [2, 3, 3], [4], 5), [3])  # 空闲页表里出现两次
    assert same(check_integrity(root, [2, 3, 1], [4], 5), [1])  # 既空闲又缓存着
    assert same(check_integrity(root, [2, 3], [4, 0], 5), [0])  # 既缓存着又被请求独占
    assert same(check_integrity(root, [2, 3], [4, 4], 5), [4])  # 两个请求独占同一页
    assert same(check_integrity(root, [2], [4], 5), [3])  # 丢了


def test_integrity_out_of_range_and_order():
    root = Node()
    add(root, [1, 1], [0, 7])
    assert same(check_integrity(root, [1, -1], [2, 2], 3), [-1, 2, 7])
    assert same(check_integrity(Node(), [], [], 0), [])
    assert same(check_integrity(Node(), [], [], 2), [0, 1])


def _random_tree(rng, num_pages):
    """随机的树：页号打乱后分给节点；随机挑几个节点沿路径加锁；last_access 随机。"""
    pages = list(range(num_pages))
    rng.shuffle(pages)
    root = Node()
    nodes = [root]
    used = 0
    token = 0
    while used < num_pages * 2 // 3:
        parent = rng.choice(nodes)
        n = min(rng.randint(1, 3), num_pages * 2 // 3 - used)
        key = []
        for _ in range(n):
            token += 1
            key += [token, token]
        node = add(parent, key, pages[used : used + n], last_access=rng.randint(0, 8))
        nodes.append(node)
        used += n
    for _ in range(rng.randint(0, 3)):
        node = rng.choice(nodes)
        while node.parent is not None:
            node.lock_ref += 1
            node = node.parent
    return root, pages[used:]


def _reference_evict(root, n):
    """朴素实现：每次扫一遍整棵树找最该淘汰的叶子。"""
    freed = []
    while len(freed) < n:
        best, stack = None, list(root.children.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if not node.children and node.lock_ref == 0:
                if best is None or (node.last_access, node.pages[0]) < (
                    best.last_access,
                    best.pages[0],
                ):
                    best = node
        assert best is not None
        del best.parent.children[tuple(best.key[:2])]
        freed.extend(best.pages)
    return freed


def test_random_trees_against_a_simple_reference():
    rng = random.Random(31)
    for _ in range(60):
        seed = rng.randrange(10**9)
        root, free = _random_tree(random.Random(seed), 30)
        ref_root, _ = _random_tree(random.Random(seed), 30)
        assert same(check_integrity(root, free, [], 30), [])
        for _ in range(4):
            stack, evictable = list(root.children.values()), 0
            while stack:
                node = stack.pop()
                stack.extend(node.children.values())
                evictable += len(node.pages) if node.lock_ref == 0 else 0
            n = rng.randint(1, 6)
            if n > evictable:
                before = dump(root)
                _raises_value_error(evict, root, n)
                assert same(dump(root), before)
                continue
            got = evict(root, n)
            assert same(got, _reference_evict(ref_root, n))
            assert len(got) >= n
            free += got
            assert same(dump(root), dump(ref_root))
            assert same(check_integrity(root, free, [], 30), [])
