"""050 的可见测试：题面里的示例。"""

from solution import Request, plan, simulate


def test_plan_examples():
    assert plan(6, 10, num_pages=8, page_size=4) == (10, 4)
    assert plan(20, 100, num_pages=8, page_size=4) == (12, 8)
    assert plan(40, 5, num_pages=8, page_size=4) is None


def test_simulate_example():
    reqs = [
        Request(0, 0, 6, 10),
        Request(1, 0, 6, 10),
        Request(2, 0, 4, 4),
        Request(3, 1, 40, 5),
        Request(4, 1, 20, 100),
    ]
    assert simulate(8, 4, 4, reqs) == [
        (0, "admit", 0),
        (0, "admit", 1),
        (1, "reject", 3),
        (9, "finish", 0),
        (9, "finish", 1),
        (10, "admit", 2),
        (13, "finish", 2),
        (14, "admit", 4),
        (25, "finish", 4),
    ]
