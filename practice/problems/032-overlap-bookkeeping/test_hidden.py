"""032 的隐藏测试：到达时间、空转的轮次、队首阻塞、一个 token 就结束、最后一批、
随机负载下两种循环输出相同。"""

import random

from solution import run_loop


def _raises_value_error(*args):
    try:
        value = run_loop(*args)
    except ValueError:
        return
    raise AssertionError(f"run_loop{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_idle_steps_before_arrival():
    t = run_loop([(2, 1)], 1, overlap=False)
    assert (t.batches, t.outputs, t.discarded) == ([[], [], [0]], {0: [0]}, [])
    t = run_loop([(2, 1)], 1, overlap=True)
    assert (t.batches, t.outputs, t.discarded) == ([[], [], [0], [0], []], {0: [0]}, [(0, 1)])


def test_no_requests():
    for overlap in (False, True):
        t = run_loop([], 3, overlap)
        assert (t.batches, t.outputs, t.discarded) == ([], {}, [])


def test_gap_between_requests():
    # 请求 1 到达时请求 0 已经结束了：中间有空转的轮次
    t = run_loop([(0, 2), (5, 1)], 4, overlap=True)
    assert t.batches == [[0], [0], [0], [], [], [1], [1], []]
    assert t.discarded == [(0, 2), (1, 1)]
    t = run_loop([(0, 2), (5, 1)], 4, overlap=False)
    assert t.batches == [[0], [0], [], [], [], [1]]


def test_head_of_line_and_arrival_order():
    # 队伍按 (arrive, uid) 排：请求 2 先到；max_running = 1
    reqs = [(1, 2), (1, 1), (0, 1)]
    t = run_loop(reqs, 1, overlap=False)
    assert t.batches == [[2], [0], [0], [1]]
    t = run_loop(reqs, 1, overlap=True)
    assert t.batches == [[2], [2], [0], [0], [0], [1], [1], []]
    assert t.discarded == [(2, 1), (0, 2), (1, 1)]
    assert t.outputs == {0: [0, 1], 1: [0], 2: [0]}


def test_last_batch_is_processed():
    t = run_loop([(0, 3)], 1, overlap=True)
    assert t.batches == [[0], [0], [0], [0], []]
    assert t.outputs == {0: [0, 1, 2]}
    assert t.discarded == [(0, 3)]


def test_discarded_in_processing_order():
    t = run_loop([(0, 3), (0, 1), (0, 2)], 3, overlap=True)
    assert t.batches == [[0, 1, 2], [0, 1, 2], [0, 2], [0], []]
    assert t.discarded == [(1, 1), (2, 2), (0, 3)]


def test_bad_arguments():
    _raises_value_error([(0, 1)], 0, True)
    _raises_value_error([(0, 0)], 1, False)
    _raises_value_error([(-1, 2)], 1, True)


def test_random_workloads_same_outputs():
    rng = random.Random(11)
    for _ in range(200):
        n = rng.randint(1, 8)
        reqs = [(rng.randint(0, 6), rng.randint(1, 5)) for _ in range(n)]
        cap = rng.randint(1, 4)
        plain = run_loop(reqs, cap, overlap=False)
        over = run_loop(reqs, cap, overlap=True)
        want = {uid: list(range(t)) for uid, (_, t) in enumerate(reqs)}
        assert plain.outputs == want
        assert over.outputs == want
        assert plain.discarded == []
        assert sorted(over.discarded) == sorted((uid, t) for uid, (_, t) in enumerate(reqs))
        assert over.batches[-1] == []
        for batches in (plain.batches, over.batches):
            assert all(len(b) <= cap and b == sorted(b) for b in batches)
        # 每个请求在重叠循环里恰好多发射一次
        for uid, (_, t) in enumerate(reqs):
            assert sum(uid in b for b in plain.batches) == t
            assert sum(uid in b for b in over.batches) == t + 1
