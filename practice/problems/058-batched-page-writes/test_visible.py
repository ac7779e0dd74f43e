"""058 的可见测试：题面里的示例。"""

from solution import Req, decode_page_writes, pages_for


def test_pages_for():
    assert pages_for(0, 4) == 0
    assert pages_for(5, 4) == 2
    assert pages_for(8, 4) == 2
    assert pages_for(3, 1) == 3


def test_first_decode_page_size_one():
    free = list(range(63, -1, -1))
    reqs = [Req(0, [], 3), Req(1, [], 5), Req(2, [], 2), Req(3, [], 7)]
    rows, cols, slots = decode_page_writes(reqs, free, 1)
    assert reqs[3].pages == [10, 11, 12, 13, 14, 15, 16]
    assert (rows[:4], cols[:4], slots[:4]) == ([0, 0, 0, 1], [0, 1, 2, 0], [0, 1, 2, 3])
    assert len(rows) == len(cols) == len(slots) == 17


def test_one_page_of_four():
    free = [9, 5]
    req = Req(row=2, pages=[7], device_len=5)
    assert decode_page_writes([req], free, 4) == ([2, 2, 2, 2], [4, 5, 6, 7], [20, 21, 22, 23])
    assert req.pages == [7, 5] and free == [9]
