"""028 的可见测试。"""

from solution import pages_needed, simulate

REQS = [(0, 6, 2), (1, 3, 3), (2, 2, 1)]


def test_pages_needed():
    assert pages_needed(7, 2) == 4
    assert pages_needed(6, 2) == 3


def test_example_chunked_request_is_reserved():
    assert simulate(REQS, num_pages=6, page_size=2, max_running=3, max_extend_tokens=4) == [
        ("prefill", [(0, 0, 4)], 4),
        ("prefill", [(0, 4, 6)], 3),
        ("decode", [(0, 6, 7)], 6),
        ("prefill", [(1, 0, 3), (2, 0, 1)], 3),
        ("prefill", [(2, 1, 2)], 4),
        ("decode", [(1, 3, 4)], 4),
        ("decode", [(1, 4, 5)], 6),
    ]


def test_rows_limit():
    # 8 页够用，但只有 2 行：uid 2 要等 uid 0 结束才有行
    assert simulate(REQS, num_pages=8, page_size=2, max_running=2, max_extend_tokens=4) == [
        ("prefill", [(0, 0, 4)], 6),
        ("prefill", [(0, 4, 6), (1, 0, 2)], 4),
        ("prefill", [(1, 2, 3)], 3),
        ("decode", [(0, 6, 7), (1, 3, 4)], 6),
        ("prefill", [(2, 0, 2)], 6),
        ("decode", [(1, 4, 5)], 8),
    ]
