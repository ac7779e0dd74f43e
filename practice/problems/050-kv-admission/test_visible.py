"""050 的可见测试：题面里的示例。"""

from solution import Request, plan, simulate


def test_plan_examples():
    assert plan(6, 10, num_pages=8, page_size=4) == (10, 4)
    assert plan(20, 100, num_pages=8, page_size=4) == (12, 8)
    assert plan(40, 5, num_pages=8, page_size=4) is None


def test_whole_reservation_example():
    reqs = [
        Request(0, 0, 6, 10),
        Request(1, 0, 6, 10),
        Request(2, 0, 4, 4),
        Request(3, 1, 40, 5),
        Request(4, 1, 20, 100),
    ]
    expected = [
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
    assert simulate(8, 4, 4, reqs) == expected
    assert simulate(8, 4, 4, reqs, headroom=None) == expected


def test_optimistic_admission_example():
    reqs = [Request(0, 0, 3, 100), Request(1, 0, 3, 4), Request(2, 0, 3, 4)]
    # 整段预留：0 不写上限，截成 13 个 token，要整个池子，1、2 只能等它做完
    assert simulate(8, 2, 4, reqs) == [
        (0, "admit", 0),
        (12, "finish", 0),
        (13, "admit", 1),
        (13, "admit", 2),
        (16, "finish", 1),
        (16, "finish", 2),
    ]
    # 乐观接纳：0 和 1 一起跑；2 跑到一半缺页被退回，0 做完后接着生成剩下的 1 个 token
    assert simulate(8, 2, 4, reqs, headroom=2) == [
        (0, "admit", 0),
        (0, "admit", 1),
        (3, "finish", 1),
        (4, "admit", 2),
        (7, "retract", 2),
        (12, "finish", 0),
        (13, "admit", 2),
        (13, "finish", 2),
    ]
