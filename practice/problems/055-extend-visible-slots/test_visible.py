"""055 的可见测试：题面里的示例。"""

from solution import kv_blocks, kv_end, visible_slots

ROW = [8, 9, 10, 11, 0, 1, 2, 3, 99, 99]


def test_visible_slots_examples():
    assert visible_slots(ROW, 3, 2) == [[8, 9, 10, 11], [8, 9, 10, 11, 0]]
    assert visible_slots(ROW, 0, 3) == [[8], [8, 9], [8, 9, 10]]


def test_kv_end_examples():
    assert kv_end(100, 50, 0, 32) == 132
    assert kv_end(100, 50, 1, 32) == 150
    assert kv_end(100, 50, 2, 32) == 0
    assert kv_blocks(100, 50, 0, 32, 32) == 5
