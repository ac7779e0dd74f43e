"""050 的隐藏测试：截断与拒绝、队头不被跳过、位置上限、空闲的间隔、随机用例上的不变量。"""

import random

from solution import Request, plan, simulate


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


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def replay(num_pages, page_size, max_running, reqs, events):
    """按事件重放，检查不变量；返回 {uid: (admit 步, finish 步)}。"""
    by_uid = {r.uid: r for r in reqs}
    steps = [e[0] for e in events]
    assert same(steps, sorted(steps)), "事件要按步排好"
    running = {}
    spans = {}
    rejected = set()
    for step, kind, uid in events:
        r = by_uid[uid]
        p = plan(r.prompt_len, r.max_tokens, num_pages, page_size)
        if kind == "reject":
            assert p is None and step == r.arrival
            rejected.add(uid)
        elif kind == "admit":
            assert p is not None and uid not in spans and step >= r.arrival
            spans[uid] = (step, None)
            running[uid] = (step, p)
            assert sum(q[1][1] for q in running.values()) <= num_pages, "页超了"
            assert len(running) <= max_running, "位置超了"
        else:
            admit, (output, _) = running.pop(uid)
            assert same(step - admit + 1, output), "生成的 token 数不对"
            spans[uid] = (admit, step)
    assert not running
    for r in reqs:
        if plan(r.prompt_len, r.max_tokens, num_pages, page_size) is None:
            assert r.uid in rejected
        else:
            assert spans[r.uid][1] is not None
    return spans


def reference(num_pages, page_size, max_running, reqs):
    order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival, i))
    pending = [reqs[i] for i in order]
    queue, running, events, step = [], [], [], 0
    while pending or queue or running:
        while pending and pending[0].arrival == step:
            r = pending.pop(0)
            p = plan(r.prompt_len, r.max_tokens, num_pages, page_size)
            if p is None:
                events.append((step, "reject", r.uid))
            else:
                queue.append([r.uid, p[0], p[1]])
        while queue and len(running) < max_running:
            if sum(x[2] for x in running) + queue[0][2] > num_pages:
                break
            uid, output, pages = queue.pop(0)
            running.append([uid, output, pages, 0])
            events.append((step, "admit", uid))
        for x in running:
            x[3] += 1
        events += [(step, "finish", x[0]) for x in running if x[3] == x[1]]
        running = [x for x in running if x[3] < x[1]]
        step += 1
    return events


def test_plan_edges():
    assert plan(32, 1, num_pages=8, page_size=4) is None  # 提示正好占满容量：一个都生成不了
    assert same(plan(31, 9, num_pages=8, page_size=4), (1, 8))
    assert same(plan(5, 3, num_pages=8, page_size=4), (3, 2))  # 8 个 token 正好 2 页
    assert same(plan(5, 4, num_pages=8, page_size=4), (4, 3))  # 9 个 token 要 3 页
    assert same(plan(1, 10**9, num_pages=3, page_size=1), (2, 3))


def test_head_of_line_is_not_skipped():
    reqs = [Request(0, 0, 2, 5), Request(1, 0, 2, 6), Request(2, 0, 1, 1)]
    # 1 要 8 页，和 0 的 7 页放不下；2 只要 2 页，放得下，但排在 1 后面也得等
    assert same(
        simulate(10, 1, 8, reqs),
        [
            (0, "admit", 0),
            (4, "finish", 0),
            (5, "admit", 1),
            (5, "admit", 2),
            (5, "finish", 2),
            (10, "finish", 1),
        ],
    )


def test_whole_generation_is_reserved():
    # 提示都很短，但每个要生成 20 个 token：按整段算，一次只放得下一个
    reqs = [Request(i, 0, 2, 20) for i in range(3)]
    events = simulate(30, 1, 8, reqs)
    assert same(
        events,
        [
            (0, "admit", 0),
            (19, "finish", 0),
            (20, "admit", 1),
            (39, "finish", 1),
            (40, "admit", 2),
            (59, "finish", 2),
        ],
    )


def test_max_running_limits_the_batch():
    reqs = [Request(i, 0, 1, 2) for i in range(5)]
    assert same(
        simulate(100, 1, 2, reqs),
        [
            (0, "admit", 0),
            (0, "admit", 1),
            (1, "finish", 0),
            (1, "finish", 1),
            (2, "admit", 2),
            (2, "admit", 3),
            (3, "finish", 2),
            (3, "finish", 3),
            (4, "admit", 4),
            (5, "finish", 4),
        ],
    )


def test_too_large_is_truncated_or_rejected_not_queued_forever():
    reqs = [
        Request(0, 0, 50, 1),  # 提示就比整个池子大：拒绝
        Request(1, 0, 10, 1000),  # 截成 6 个 token，占满 16 页
        Request(2, 0, 3, 2),
    ]
    assert same(
        simulate(4, 4, 8, reqs),
        [
            (0, "reject", 0),
            (0, "admit", 1),
            (5, "finish", 1),
            (6, "admit", 2),
            (7, "finish", 2),
        ],
    )


def test_idle_gap_and_late_arrival():
    reqs = [Request(7, 0, 1, 1), Request(8, 100, 1, 2)]
    assert same(
        simulate(4, 1, 1, reqs),
        [
            (0, "admit", 7),
            (0, "finish", 7),
            (100, "admit", 8),
            (101, "finish", 8),
        ],
    )
    assert same(simulate(4, 1, 1, []), [])


def test_arrival_order_within_a_step_follows_the_list():
    reqs = [Request(5, 2, 1, 1), Request(3, 1, 1, 3), Request(4, 2, 1, 1)]
    assert same(
        simulate(5, 1, 1, reqs),
        [
            (1, "admit", 3),
            (3, "finish", 3),
            (4, "admit", 5),
            (4, "finish", 5),
            (5, "admit", 4),
            (5, "finish", 4),
        ],
    )


def test_random_cases_match_the_rules():
    rng = random.Random(50)
    for _ in range(300):
        num_pages, page_size = rng.randint(1, 12), rng.randint(1, 4)
        max_running = rng.randint(1, 4)
        reqs = [
            Request(i, rng.randint(0, 15), rng.randint(1, 30), rng.randint(1, 30))
            for i in rng.sample(range(100), rng.randint(0, 9))
        ]
        events = simulate(num_pages, page_size, max_running, reqs)
        spans = replay(num_pages, page_size, max_running, reqs, events)
        assert same(events, reference(num_pages, page_size, max_running, reqs))
        # 先来先服务：接纳的先后就是到达的先后
        arrival_order = sorted(
            (r for r in reqs if r.uid in spans), key=lambda r: (r.arrival, reqs.index(r))
        )
        admits = [uid for _, kind, uid in events if kind == "admit"]
        assert same(admits, [r.uid for r in arrival_order])


def test_bad_arguments():
    ok = [Request(0, 0, 1, 1)]
    assert raises(simulate, 0, 1, 1, ok)
    assert raises(simulate, 1, 0, 1, ok)
    assert raises(simulate, 1, 1, 0, ok)
    assert raises(simulate, 4, 1, 1, [Request(0, -1, 1, 1)])
    assert raises(simulate, 4, 1, 1, [Request(0, 0, 0, 1)])
    assert raises(simulate, 4, 1, 1, [Request(0, 0, 1, 0)])
    assert raises(simulate, 4, 1, 1, [Request(0, 0, 1, 1), Request(0, 1, 1, 1)])
