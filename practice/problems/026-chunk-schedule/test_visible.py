"""026 的可见测试。"""

from solution import chunk_schedule

PROMPTS = [(0, 10), (1, 3), (2, 20)]


def test_budget_7():
    assert chunk_schedule(PROMPTS, 7) == [
        [(0, 0, 7)],
        [(0, 7, 10), (1, 0, 3), (2, 0, 1)],
        [(2, 1, 8)],
        [(2, 8, 15)],
        [(2, 15, 20)],
    ]


def test_budget_64():
    assert chunk_schedule(PROMPTS, 64) == [[(0, 0, 10), (1, 0, 3), (2, 0, 20)]]


def test_budget_1_step_count():
    assert len(chunk_schedule(PROMPTS, 1)) == 33


def test_exact_fit():
    assert chunk_schedule([(5, 4), (6, 4)], 4) == [[(5, 0, 4)], [(6, 0, 4)]]
