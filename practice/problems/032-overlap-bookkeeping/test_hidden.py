"""032 的隐藏测试：到达时间、空转的轮次、队首阻塞、一个 token 就结束、最后一批、
随机负载下两种循环输出相同。"""

import random

from solution import run_loop


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


def _raises_value_error(*args):
    try:
        value = run_loop(*args)
    except ValueError:
        return
    raise AssertionError(f"run_loop{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_idle_steps_before_arrival():
    t = run_loop([(2, 1)], 1, overlap=False)
    assert same((t.batches, t.outputs, t.discarded), ([[], [], [0]], {0: [0]}, []))
    t = run_loop([(2, 1)], 1, overlap=True)
    assert same((t.batches, t.outputs, t.discarded), ([[], [], [0], [0], []], {0: [0]}, [(0, 1)]))


def test_no_requests():
    for overlap in (False, True):
        t = run_loop([], 3, overlap)
        assert same((t.batches, t.outputs, t.discarded), ([], {}, []))


def test_gap_between_requests():
    # 请求 1 到达时请求 0 已经结束了：中间有空转的轮次
    t = run_loop([(0, 2), (5, 1)], 4, overlap=True)
    assert same(t.batches, [[0], [0], [0], [], [], [1], [1], []])
    assert same(t.discarded, [(0, 2), (1, 1)])
    t = run_loop([(0, 2), (5, 1)], 4, overlap=False)
    assert same(t.batches, [[0], [0], [], [], [], [1]])


def test_head_of_line_and_arrival_order():
    # 队伍按 (arrive, uid) 排：请求 2 先到；max_running = 1
    reqs = [(1, 2), (1, 1), (0, 1)]
    t = run_loop(reqs, 1, overlap=False)
    assert same(t.batches, [[2], [0], [0], [1]])
    t = run_loop(reqs, 1, overlap=True)
    assert same(t.batches, [[2], [2], [0], [0], [0], [1], [1], []])
    assert same(t.discarded, [(2, 1), (0, 2), (1, 1)])
    assert same(t.outputs, {0: [0, 1], 1: [0], 2: [0]})


def test_last_batch_is_processed():
    t = run_loop([(0, 3)], 1, overlap=True)
    assert same(t.batches, [[0], [0], [0], [0], []])
    assert same(t.outputs, {0: [0, 1, 2]})
    assert same(t.discarded, [(0, 3)])


def test_discarded_in_processing_order():
    t = run_loop([(0, 3), (0, 1), (0, 2)], 3, overlap=True)
    assert same(t.batches, [[0, 1, 2], [0, 1, 2], [0, 2], [0], []])
    assert same(t.discarded, [(1, 1), (2, 2), (0, 3)])


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
        assert same(plain.outputs, want)
        assert same(over.outputs, want)
        assert same(plain.discarded, [])
        assert same(sorted(over.discarded), sorted((uid, t) for uid, (_, t) in enumerate(reqs)))
        assert same(over.batches[-1], [])
        for batches in (plain.batches, over.batches):
            assert all(len(b) <= cap and b == sorted(b) for b in batches)
        # 每个请求在重叠循环里恰好多发射一次
        for uid, (_, t) in enumerate(reqs):
            assert same(sum(uid in b for b in plain.batches), t)
            assert same(sum(uid in b for b in over.batches), t + 1)
