"""058 的隐藏测试：和逐个请求写对照（几步 decode、页大小 1/2/4/16）、不缺页的、要么全做要么不做。"""

import copy
import random

from solution import Req, decode_page_writes, pages_for


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


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def one_by_one(reqs, free, page_size, table):
    """第 8 章的写法：每个请求拿到页就写它那一行（整页写）。"""
    for req in reqs:
        missing = -(-req.device_len // page_size) - len(req.pages)
        if missing <= 0:
            continue
        start = len(req.pages)
        req.pages += [free.pop() for _ in range(missing)]
        for j in range(start, len(req.pages)):
            for i in range(page_size):
                table[req.row][j * page_size + i] = req.pages[j] * page_size + i


def apply(table, rows, cols, slots):
    assert len(rows) == len(cols) == len(slots)
    for r, c, s in zip(rows, cols, slots):
        table[r][c] = s


def test_equal_to_one_by_one_over_several_steps():
    for page_size in (1, 2, 4, 16):
        rng = random.Random(page_size)
        width = 128
        a = [Req(i, [], rng.randint(1, 40)) for i in range(8)]
        rng.shuffle(a)  # 行号和批次里的顺序无关
        b = copy.deepcopy(a)
        free_a = list(range(399, -1, -1))
        free_b = list(free_a)
        table_a = [[-1] * width for _ in range(8)]
        table_b = [[-1] * width for _ in range(8)]
        for step in range(7):
            if step:
                for ra, rb in zip(a, b):
                    ra.device_len += 1
                    rb.device_len += 1
            one_by_one(a, free_a, page_size, table_a)
            apply(table_b, *decode_page_writes(b, free_b, page_size))
            assert same([r.pages for r in a], [r.pages for r in b]), (page_size, step)
            assert same(table_a, table_b), (page_size, step)
            assert same(free_a, free_b)


def test_writes_are_grouped_by_request_page_offset():
    free = [30, 20, 10]
    reqs = [Req(5, [], 3), Req(1, [4], 3)]
    rows, cols, slots = decode_page_writes(reqs, free, 2)
    assert reqs[0].pages == [10, 20] and reqs[1].pages == [4, 30]
    assert same(rows, [5, 5, 5, 5, 1, 1])
    assert same(cols, [0, 1, 2, 3, 2, 3])
    assert same(slots, [20, 21, 40, 41, 60, 61])


def test_requests_with_enough_pages_write_nothing():
    free = [3, 2, 1]
    reqs = [Req(0, [7], 1), Req(1, [8, 9], 3)]  # 页大小 2：各需 1 页、2 页，都够了
    assert same(decode_page_writes(reqs, free, 2), ([], [], []))
    assert free == [3, 2, 1] and reqs[0].pages == [7]
    assert same(decode_page_writes([], free, 2), ([], [], []))
    extra = Req(0, [1, 2, 3], 1)  # 多出来的页不还
    assert same(decode_page_writes([extra], free, 4), ([], [], []))
    assert extra.pages == [1, 2, 3] and free == [3, 2, 1]


def test_not_enough_pages_changes_nothing():
    free = [4, 3, 2]
    reqs = [Req(0, [], 2), Req(1, [], 2)]  # 页大小 1：一共缺 4 页，只有 3 页
    assert raises(decode_page_writes, reqs, free, 1)
    assert same(free, [4, 3, 2])
    assert reqs[0].pages == [] and reqs[1].pages == []
    # 刚好够
    assert same(len(decode_page_writes([Req(0, [], 1), Req(1, [], 2)], free, 1)[0]), 3)
    assert same(free, [])


def test_bad_page_size():
    assert raises(decode_page_writes, [Req(0, [], 1)], [1], 0)
    assert raises(pages_for, 3, 0)
    assert raises(pages_for, -1, 4)


def test_slots_unique_and_rows_consistent():
    rng = random.Random(58)
    page_size = 4
    reqs = [Req(i, [], rng.randint(1, 30)) for i in range(10)]
    free = list(range(99, -1, -1))
    rows, cols, slots = decode_page_writes(reqs, free, page_size)
    assert same(len(set(slots)), len(slots))
    for req in reqs:
        mine = [(c, s) for r, c, s in zip(rows, cols, slots) if r == req.row]
        assert same([c for c, _ in mine], list(range(len(req.pages) * page_size)))
        assert same([s for _, s in mine], [p * page_size + i for p in req.pages for i in range(4)])
