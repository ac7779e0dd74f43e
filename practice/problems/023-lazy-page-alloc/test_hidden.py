"""023 的隐藏测试：页边界、只补缺的页、分配顺序、页不够时不改状态、各种重复释放。"""

from solution import PageAllocator, pages_needed


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


def _raises(exc_type, func, *args):
    try:
        value = func(*args)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_pages_needed_boundaries():
    assert same([pages_needed(n, 4) for n in range(10)], [0, 1, 1, 1, 1, 2, 2, 2, 2, 3])
    assert same([pages_needed(n, 1) for n in range(4)], [0, 1, 2, 3])
    assert same(pages_needed(16, 16), 1)
    assert same(pages_needed(17, 16), 2)


def test_decode_one_token_at_a_time():
    alloc = PageAllocator(num_pages=4, page_size=4)
    pages = []
    alloc.extend(pages, 0, 1)
    counts = [len(pages)]
    for n in range(1, 16):
        assert same(alloc.extend(pages, n, n + 1), [pages[n // 4] * 4 + n % 4])
        counts.append(len(pages))
    # 只在写到新一页的第一格（位置 4、8、12）时才多一页
    assert same(counts, [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4])
    assert same(pages, [0, 1, 2, 3])
    assert same(alloc.available_pages, 0)


def test_exact_page_boundary_takes_no_extra_page():
    alloc = PageAllocator(num_pages=3, page_size=4)
    pages = []
    assert same(alloc.extend(pages, 0, 4), [0, 1, 2, 3])
    assert same(pages, [0])
    assert same(alloc.available_pages, 2)
    assert same(alloc.extend(pages, 4, 8), [4, 5, 6, 7])
    assert same(pages, [0, 1])
    assert same(alloc.available_pages, 1)


def test_partially_filled_last_page_is_used_first():
    alloc = PageAllocator(num_pages=6, page_size=4)
    a, b = [], []
    alloc.extend(a, 0, 3)  # a: 页 0，写了 3 格
    alloc.extend(b, 0, 2)  # b: 页 1
    # a 再写 2 个 token：先填页 0 的最后一格，再要 1 页（页 2）
    assert same(alloc.extend(a, 3, 5), [3, 8])
    assert same(a, [0, 2])
    # b 再写 6 个 token：页 1 还有 2 格，再要 1 页就够（8 个 token = 2 页）
    assert same(alloc.extend(b, 2, 8), [6, 7, 12, 13, 14, 15])
    assert same(b, [1, 3])
    assert same(alloc.available_pages, 2)


def test_freed_pages_go_to_the_back():
    alloc = PageAllocator(num_pages=4, page_size=2)
    a, b = [], []
    alloc.extend(a, 0, 3)  # a = [0, 1]
    alloc.extend(b, 0, 1)  # b = [2]
    alloc.free([1, 0])
    c = []
    # 空闲页列表是 [3, 1, 0]
    assert same(alloc.extend(c, 0, 5), [6, 7, 2, 3, 0])
    assert same(c, [3, 1, 0])
    assert same(alloc.available_pages, 0)


def test_slots_when_pages_are_not_in_order():
    alloc = PageAllocator(num_pages=4, page_size=3)
    a = []
    alloc.extend(a, 0, 1)
    alloc.free(a)  # 空闲页列表 [1, 2, 3, 0]
    b = []
    assert same(alloc.extend(b, 0, 7), [3, 4, 5, 6, 7, 8, 9])
    assert same(alloc.extend(b, 7, 11), [10, 11, 0, 1])
    assert same(b, [1, 2, 3, 0])


def test_not_enough_pages_changes_nothing():
    alloc = PageAllocator(num_pages=3, page_size=4)
    a = []
    alloc.extend(a, 0, 5)  # a = [0, 1]
    b = []
    _raises(RuntimeError, alloc.extend, b, 0, 9)
    assert same(b, [])
    assert same(alloc.available_pages, 1)
    _raises(RuntimeError, alloc.extend, a, 5, 13)
    assert same(a, [0, 1])
    assert same(alloc.available_pages, 1)
    assert same(alloc.extend(a, 5, 12), [5, 6, 7, 8, 9, 10, 11])
    assert same(a, [0, 1, 2])
    assert same(alloc.available_pages, 0)


def test_bad_extend_arguments():
    alloc = PageAllocator(num_pages=4, page_size=4)
    pages = []
    alloc.extend(pages, 0, 5)
    _raises(ValueError, alloc.extend, pages, 5, 5)
    _raises(ValueError, alloc.extend, pages, 6, 5)
    _raises(ValueError, alloc.extend, pages, -1, 5)
    _raises(ValueError, alloc.extend, pages, 4, 6)  # 4 个 token 只该有 1 页
    _raises(ValueError, alloc.extend, pages, 9, 10)  # 9 个 token 该有 3 页
    _raises(ValueError, alloc.extend, [], 1, 2)
    assert same(pages, [0, 1])
    assert same(alloc.available_pages, 2)


def test_double_free_is_rejected_and_frees_nothing():
    alloc = PageAllocator(num_pages=4, page_size=2)
    a, b = [], []
    alloc.extend(a, 0, 4)  # a = [0, 1]
    alloc.extend(b, 0, 4)  # b = [2, 3]
    alloc.free(a)
    _raises(ValueError, alloc.free, a)
    _raises(ValueError, alloc.free, [2, 0])  # 第 2 页没问题，第 0 页已经空闲：一页也不还
    _raises(ValueError, alloc.free, [2, 2])
    _raises(ValueError, alloc.free, [4])
    _raises(ValueError, alloc.free, [-1])
    assert same(alloc.available_pages, 2)
    alloc.free([3, 2])
    assert same(alloc.available_pages, 4)
    c = []
    assert same(alloc.extend(c, 0, 8), [0, 1, 2, 3, 6, 7, 4, 5])
    assert same(c, [0, 1, 3, 2])


def test_free_does_not_modify_argument():
    alloc = PageAllocator(num_pages=2, page_size=2)
    a = []
    alloc.extend(a, 0, 3)
    alloc.free(a)
    assert same(a, [0, 1])
    alloc.free([])
    assert same(alloc.available_pages, 2)
