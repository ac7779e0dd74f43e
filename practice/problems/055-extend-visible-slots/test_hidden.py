"""055 的隐藏测试：和按位置的掩码逐个比较、不同页大小、decode、扫描范围、参数检查。"""

import random

from solution import kv_blocks, kv_end, visible_slots


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


def page_row(rng, columns, page_size):
    pages = list(range(columns // page_size * 3))
    rng.shuffle(pages)
    return [p * page_size + i for p in pages[: columns // page_size] for i in range(page_size)]


def brute(row, cached, extend):
    out = []
    for j in range(extend):
        out.append([row[pos] for pos in range(cached + extend) if pos <= cached + j])
    return out


def test_matches_position_mask_for_any_page_size():
    rng = random.Random(55)
    for page_size in (1, 2, 4, 16):
        for _ in range(30):
            row = page_row(rng, 64, page_size)
            cached = rng.randint(0, 40)
            extend = rng.randint(1, 64 - cached)
            assert same(visible_slots(row, cached, extend), brute(row, cached, extend))


def test_prefix_is_visible_to_every_new_token():
    row = list(range(100, 120))
    got = visible_slots(row, 5, 4)
    for j, slots in enumerate(got):
        assert same(slots[:5], [100, 101, 102, 103, 104])
        assert slots[-1] == row[5 + j] and len(slots) == 6 + j


def test_decode_sees_everything():
    row = [7, 3, 9, 1, 5]
    assert same(visible_slots(row, 4, 1), [[7, 3, 9, 1, 5]])
    assert same(visible_slots(row, 0, 1), [[7]])


def test_longer_row_is_fine_and_result_is_a_copy():
    row = (4, 5, 6, 7, 0, 0, 0)
    got = visible_slots(row, 1, 2)
    assert got == [[4, 5], [4, 5, 6]] and all(isinstance(x, list) for x in got)


def test_kv_end_is_the_last_q_of_the_block():
    rng = random.Random(5)
    for _ in range(200):
        cached, extend = rng.randint(0, 300), rng.randint(1, 200)
        block_m = rng.choice([1, 16, 32, 64])
        for mb in range(-(-extend // block_m) + 2):
            qs = [j for j in range(mb * block_m, (mb + 1) * block_m) if j < extend]
            want = cached + qs[-1] + 1 if qs else 0
            assert same(kv_end(cached, extend, mb, block_m), want), (cached, extend, mb, block_m)


def test_kv_blocks():
    assert same(kv_blocks(0, 45, 0, 32, 32), 1)
    assert same(kv_blocks(0, 45, 1, 32, 32), 2)
    assert same(kv_blocks(150, 20, 0, 32, 32), 6)
    assert same(kv_blocks(37, 1, 0, 32, 32), 2)
    assert same(kv_blocks(5, 70, 2, 32, 32), 3)
    assert same(kv_blocks(5, 70, 3, 32, 32), 0)
    assert same(kv_blocks(0, 1, 0, 1, 1), 1)


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def test_bad_arguments():
    assert raises(visible_slots, [1, 2, 3], 2, 2)
    assert raises(visible_slots, [1, 2, 3], -1, 1)
    assert raises(visible_slots, [1, 2, 3], 0, 0)
    assert raises(kv_end, 0, 0, 0, 32)
    assert raises(kv_end, 0, 5, -1, 32)
    assert raises(kv_end, 0, 5, 0, 0)
    assert raises(kv_blocks, 0, 5, 0, 32, 0)
