"""024 的可见测试。"""

from solution import admit_prefill, pages_needed

RUNNING = [(20, 3), (8, 2)]
PENDING = [(7, 6, 10), (8, 3, 5), (9, 1, 1)]


def test_pages_needed():
    assert pages_needed(10, 4) == 3
    assert pages_needed(8, 4) == 2


def test_all_admitted():
    assert admit_prefill(PENDING, RUNNING, 4, 10, 4, 16) == ([7, 8, 9], 6)


def test_reservation_stops_the_third():
    assert admit_prefill(PENDING, RUNNING, 4, 8, 4, 16) == ([7, 8], 7)


def test_one_free_row():
    assert admit_prefill(PENDING, RUNNING, 1, 10, 4, 16) == ([7], 10)


def test_head_of_line_blocking():
    assert admit_prefill([(1, 4, 40), (2, 2, 2)], [], 4, 10, 4, 16) == ([], 16)


def test_first_request_over_budget():
    assert admit_prefill([(1, 50, 10), (2, 3, 3)], [], 4, 100, 4, 16) == ([1], 0)
