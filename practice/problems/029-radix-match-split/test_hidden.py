"""029 的隐藏测试：半页不算命中、limit 造成的拆分、page_size = 1、指针一致、再次匹配。"""

from solution import Node, match_prefix


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


def build(spec, page_size, parent=None):
    root = parent if parent is not None else Node()
    for key, pages, children in spec:
        node = Node(list(key), list(pages), parent=root)
        root.children[tuple(key[:page_size])] = node
        build(children, page_size, node)
    return root


def dump(node):
    return sorted((c.key, c.pages, dump(c)) for c in node.children.values())


def check_tree(root, page_size):
    """每个节点：key 按页对齐、页数对得上、parent 与 children 一致、孩子按第一页登记。"""
    stack = [root]
    while stack:
        node = stack.pop()
        for first, child in node.children.items():
            assert child.parent is node, f"{child.key} 的 parent 不对"
            assert child.key and len(child.key) % page_size == 0, f"key {child.key} 没有按页对齐"
            assert same(len(child.pages), len(child.key) // page_size), f"{child.key} 的页数不对"
            assert same(first, tuple(child.key[:page_size])), f"{child.key} 登记在 {first} 下"
            stack.append(child)


def _raises_value_error(*args):
    try:
        value = match_prefix(*args)
    except ValueError:
        return
    raise AssertionError(f"match_prefix 应当抛出 ValueError，实际返回了 {value!r}")


def test_half_page_is_not_a_hit():
    # 第二页只有前一半相同：只命中 1 页，拆在第 4 个 token 处
    root = build([([1, 2, 3, 4, 5, 6, 7, 8], [3, 4], [])], 4)
    assert same(match_prefix(root, [1, 2, 3, 4, 5, 6, 0, 0, 0], 4), (4, [3]))
    assert same(dump(root), [([1, 2, 3, 4], [3], [([5, 6, 7, 8], [4], [])])])
    check_tree(root, 4)


def test_first_page_must_match_fully():
    root = build([([1, 2, 3, 4], [3], [])], 4)
    assert same(match_prefix(root, [1, 2, 3, 0, 9], 4), (0, []))
    assert same(dump(root), [([1, 2, 3, 4], [3], [])])


def test_limit_splits_a_fully_cached_prompt():
    # 提示整段都在一个节点里：只能用前 2 页，节点被拆开
    root = build([([1, 2, 3, 4, 5, 6], [10, 11, 12], [])], 2)
    assert same(match_prefix(root, [1, 2, 3, 4, 5, 6], 2), (4, [10, 11]))
    assert same(dump(root), [([1, 2, 3, 4], [10, 11], [([5, 6], [12], [])])])
    check_tree(root, 2)


def test_aligned_prompt_of_exactly_one_page_matches_nothing():
    root = build([([1, 2, 3, 4], [7], [])], 4)
    assert same(match_prefix(root, [1, 2, 3, 4], 4), (0, []))
    assert same(match_prefix(root, [1, 2, 3, 4, 5], 4), (4, [7]))
    assert same(dump(root), [([1, 2, 3, 4], [7], [])])


def test_limit_inside_a_page():
    root = build([([1, 2, 3, 4, 5, 6, 7, 8], [3, 4], [])], 4)
    # 7 个 token：limit = 4，第二页根本不看
    assert same(match_prefix(root, [1, 2, 3, 4, 5, 6, 7], 4), (4, [3]))
    assert same(dump(root), [([1, 2, 3, 4], [3], [([5, 6, 7, 8], [4], [])])])


def test_page_size_one():
    root = build([([1, 2, 3], [7, 8, 9], [([4], [5], [])])], 1)
    assert same(match_prefix(root, [1, 2, 3, 4, 5], 1), (4, [7, 8, 9, 5]))
    assert same(match_prefix(root, [1, 2, 3, 4], 1), (3, [7, 8, 9]))
    assert same(match_prefix(root, [1, 2, 3], 1), (2, [7, 8]))
    assert same(dump(root), [([1, 2], [7, 8], [([3], [9], [([4], [5], [])])])])
    assert same(match_prefix(root, [1], 1), (0, []))
    check_tree(root, 1)


def test_siblings_with_the_same_first_token():
    spec = [
        ([1, 2, 5, 5], [20, 21], []),
        ([1, 3, 6, 6], [30, 31], [([7, 7], [32], [])]),
    ]
    root = build(spec, 2)
    assert same(match_prefix(root, [1, 3, 6, 6, 7, 7, 0], 2), (6, [30, 31, 32]))
    assert same(match_prefix(root, [1, 2, 5, 5, 0], 2), (4, [20, 21]))
    assert same(dump(root), dump(build(spec, 2)))


def test_split_keeps_the_original_object_below():
    root = build([([1, 2, 3, 4, 5, 6], [10, 11, 12], [([7, 8], [13], [])])], 2)
    a = root.children[(1, 2)]
    b = a.children[(7, 8)]
    assert same(match_prefix(root, [1, 2, 9, 9, 9], 2), (2, [10]))
    upper = root.children[(1, 2)]
    assert upper is not a and upper.parent is root
    assert same((upper.key, upper.pages), ([1, 2], [10]))
    assert same(list(upper.children.values()), [a])
    assert same((a.key, a.pages, a.parent), ([3, 4, 5, 6], [11, 12], upper))
    assert b.parent is a and a.children == {(7, 8): b}
    check_tree(root, 2)


def test_match_again_after_split_and_deeper_split():
    root = build([([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4], [])], 2)
    assert same(match_prefix(root, [1, 2, 3, 4, 0], 2), (4, [1, 2]))
    assert same(match_prefix(root, [1, 2, 3, 4, 5, 6, 0], 2), (6, [1, 2, 3]))
    assert same(match_prefix(root, [1, 2, 3, 4, 5, 6, 7, 8, 9], 2), (8, [1, 2, 3, 4]))
    assert same(dump(root), [([1, 2, 3, 4], [1, 2], [([5, 6], [3], [([7, 8], [4], [])])])])
    check_tree(root, 2)


def test_deeper_tree():
    spec = [
        ([1, 1], [1], [([2, 2, 3, 3], [2, 3], [([4, 4], [4], [])]), ([5, 5], [5], [])]),
        ([6, 6, 7, 7], [6, 7], []),
    ]
    root = build(spec, 2)
    assert same(match_prefix(root, [1, 1, 2, 2, 3, 3, 4, 4, 9], 2), (8, [1, 2, 3, 4]))
    assert same(match_prefix(root, [1, 1, 5, 5, 6], 2), (4, [1, 5]))
    assert same(match_prefix(root, [6, 6, 7, 8, 9], 2), (2, [6]))
    assert same(match_prefix(root, [1, 1, 2, 2, 0, 0], 2), (4, [1, 2]))
    assert same(
        dump(root),
        [
            ([1, 1], [1], [([2, 2], [2], [([3, 3], [3], [([4, 4], [4], [])])]), ([5, 5], [5], [])]),
            ([6, 6], [6], [([7, 7], [7], [])]),
        ],
    )
    check_tree(root, 2)


def test_input_not_modified_and_bad_page_size():
    root = build([([1, 2, 3, 4], [7], [])], 2)
    ids = [1, 2, 3, 4, 5]
    match_prefix(root, ids, 2)
    assert same(ids, [1, 2, 3, 4, 5])
    _raises_value_error(root, [1, 2], 0)
    _raises_value_error(root, [1, 2], -1)
