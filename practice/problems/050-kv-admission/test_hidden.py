"""050 的隐藏测试：截断与拒绝、队头不被跳过、位置上限、空闲的间隔、页的边界、退回的先后与续算、
headroom=None 和第 8 章的规则逐个相同、随机用例上的不变量、参数校验。"""

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
    """按整段预留的事件重放，检查不变量；返回 {uid: (admit 步, finish 步)}。"""
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
    """第 8 章的整段预留（改成乐观接纳之前的答案，原样冻结在这里）。"""
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


def replay_optimistic(num_pages, page_size, max_running, reqs, events):
    """按乐观接纳的事件重放：位置上限、退回从最晚接纳的开始、每个请求一共恰好生成 output 个。"""
    by_uid = {r.uid: r for r in reqs}
    running = []  # [uid, 这一段的 admit 步]，按接纳的先后
    generated = {}
    finished = set()
    for step, kind, uid in events:
        if kind == "reject":
            continue
        if kind == "admit":
            assert uid not in finished and all(x[0] != uid for x in running)
            running.append([uid, step])
            assert len(running) <= max_running, "位置超了"
        elif kind == "retract":
            assert running[-1][0] == uid, "要先退回最晚接纳的"
            assert len(running) > 1, "只剩一个请求时不退回"
            _, admit = running.pop()
            generated[uid] = generated.get(uid, 0) + step - admit
        else:
            (i,) = [i for i, x in enumerate(running) if x[0] == uid]
            _, admit = running.pop(i)
            generated[uid] = generated.get(uid, 0) + step - admit + 1
            r = by_uid[uid]
            output, _ = plan(r.prompt_len, r.max_tokens, num_pages, page_size)
            assert same(generated[uid], output), "一共生成的 token 数不对"
            finished.add(uid)
    assert not running
    for r in reqs:
        if plan(r.prompt_len, r.max_tokens, num_pages, page_size) is not None:
            assert r.uid in finished


def ceil_div(a, b):
    return -(-a // b)


def reference_optimistic(num_pages, page_size, max_running, reqs, headroom):
    """另写一遍题面的规则（按 token 数记账），和答案对照。"""
    order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival, i))
    pending = [reqs[i] for i in order]
    # 每个请求：[uid, total, output, generated, length]
    queue, running, events, step = [], [], [], 0

    def want(total, length):
        end = total if headroom is None else min(total, length + headroom)
        return ceil_div(end, page_size)

    while pending or queue or running:
        while pending and pending[0].arrival == step:
            r = pending.pop(0)
            p = plan(r.prompt_len, r.max_tokens, num_pages, page_size)
            if p is None:
                events.append((step, "reject", r.uid))
            else:
                queue.append([r.uid, r.prompt_len + p[0], p[0], 0, 0])
        while queue and len(running) < max_running:
            x = queue[0]
            start = x[1] - x[2] + x[3]
            if sum(want(y[1], y[4]) for y in running) + want(x[1], start) > num_pages:
                break
            x[4] = start
            running.append(queue.pop(0))
            events.append((step, "admit", x[0]))
        assert running or not queue
        retracted = []
        while len(running) > 1:
            held = sum(ceil_div(y[4], page_size) for y in running)
            grown = sum(ceil_div(y[4] + 1, page_size) for y in running)
            if grown <= num_pages:
                break
            x = running.pop()
            events.append((step, "retract", x[0]))
            x[4] = 0
            retracted.append(x)
            assert held <= num_pages
        queue[0:0] = retracted[::-1]
        for y in running:
            y[3] += 1
            y[4] += 1
        assert sum(ceil_div(y[4], page_size) for y in running) <= num_pages
        events += [(step, "finish", y[0]) for y in running if y[3] == y[2]]
        running = [y for y in running if y[3] < y[2]]
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


def test_headroom_none_is_the_whole_reservation():
    rng = random.Random(1750)
    for _ in range(300):
        num_pages, page_size = rng.randint(1, 12), rng.randint(1, 4)
        max_running = rng.randint(1, 5)
        reqs = [
            Request(i, rng.randint(0, 15), rng.randint(1, 30), rng.randint(1, 40))
            for i in rng.sample(range(100), rng.randint(0, 9))
        ]
        events = simulate(num_pages, page_size, max_running, reqs, headroom=None)
        assert same(events, reference(num_pages, page_size, max_running, reqs))
        assert all(kind != "retract" for _, kind, _ in events)


def test_new_page_only_at_page_boundaries():
    # 每页 4 个 token：0 写到第 8 个 token、1 写到第 4 个 token 时才要新页；
    # 第 2 步两个都要新页，池子只剩 0 页，退回 1
    reqs = [Request(0, 0, 3, 6), Request(1, 0, 2, 3)]
    assert same(
        simulate(3, 4, 4, reqs, headroom=1),
        [
            (0, "admit", 0),
            (0, "admit", 1),
            (2, "retract", 1),
            (5, "finish", 0),
            (6, "admit", 1),
            (6, "finish", 1),
        ],
    )
    # 同样的请求，池子多 1 页：从来不缺页
    assert same(
        simulate(4, 4, 4, reqs, headroom=1),
        [(0, "admit", 0), (0, "admit", 1), (2, "finish", 1), (5, "finish", 0)],
    )


def test_several_retracted_in_one_step_go_back_to_the_head_in_order():
    # 第 1 步三个请求都要新页，池子满了：先退回 2，还不够，再退回 1；
    # 1 排在 2 前面，两个都排在第 1 步才到的 9 前面
    reqs = [Request(0, 0, 3, 5), Request(1, 0, 1, 2), Request(2, 0, 1, 4), Request(9, 1, 1, 1)]
    assert same(
        simulate(4, 2, 4, reqs, headroom=1),
        [
            (0, "admit", 0),
            (0, "admit", 1),
            (0, "admit", 2),
            (1, "retract", 2),
            (1, "retract", 1),
            (4, "finish", 0),
            (5, "admit", 1),
            (5, "admit", 2),
            (5, "finish", 1),
            (6, "admit", 9),
            (6, "finish", 9),
            (7, "finish", 2),
        ],
    )


def test_retracted_request_keeps_its_tokens():
    # 1 生成了 1 个 token 后被退回；重新接纳时从 2 个 token 开始，再生成 2 个就结束
    reqs = [Request(0, 0, 1, 3), Request(1, 0, 1, 3)]
    assert same(
        simulate(4, 1, 2, reqs, headroom=0),
        [
            (0, "admit", 0),
            (0, "admit", 1),
            (1, "retract", 1),
            (2, "finish", 0),
            (3, "admit", 1),
            (4, "finish", 1),
        ],
    )


def test_headroom_zero_admits_on_the_prompt_alone():
    reqs = [Request(0, 0, 1, 2), Request(1, 0, 2, 1)]
    # 余量为 0：提示放得下就接纳，同一步生成时就缺页，刚接纳的 1 被退回
    assert same(
        simulate(3, 1, 4, reqs, headroom=0),
        [
            (0, "admit", 0),
            (0, "admit", 1),
            (0, "retract", 1),
            (1, "finish", 0),
            (2, "admit", 1),
            (2, "finish", 1),
        ],
    )
    # 余量为 1：0 要 2 页、1 要 3 页，1 在队头等
    assert same(
        simulate(3, 1, 4, reqs, headroom=1),
        [(0, "admit", 0), (1, "finish", 0), (2, "admit", 1), (2, "finish", 1)],
    )


def test_retract_down_to_a_request_that_fills_the_pool():
    # 两个请求都不写上限，各截成 3 个 token、要整个池子；乐观接纳时一起进来，缺页时退回 1
    reqs = [Request(0, 0, 1, 100), Request(1, 0, 1, 100)]
    assert same(
        simulate(4, 1, 4, reqs, headroom=0),
        [
            (0, "admit", 0),
            (0, "admit", 1),
            (1, "retract", 1),
            (2, "finish", 0),
            (3, "admit", 1),
            (4, "finish", 1),
        ],
    )


def test_max_running_limits_the_batch_with_headroom():
    reqs = [Request(i, 0, 1, 3) for i in range(4)]
    assert same(
        simulate(100, 1, 2, reqs, headroom=0),
        [
            (0, "admit", 0),
            (0, "admit", 1),
            (2, "finish", 0),
            (2, "finish", 1),
            (3, "admit", 2),
            (3, "admit", 3),
            (5, "finish", 2),
            (5, "finish", 3),
        ],
    )


def test_random_optimistic_cases_match_the_rules():
    rng = random.Random(5017)
    retracted = 0
    for _ in range(400):
        num_pages, page_size = rng.randint(1, 12), rng.randint(1, 4)
        max_running = rng.randint(1, 5)
        headroom = rng.choice([None, 0, 0, 1, 2, 3, 5, 8, 40])
        reqs = [
            Request(i, rng.randint(0, 10), rng.randint(1, 20), rng.randint(1, 40))
            for i in rng.sample(range(100), rng.randint(0, 9))
        ]
        events = simulate(num_pages, page_size, max_running, reqs, headroom)
        replay_optimistic(num_pages, page_size, max_running, reqs, events)
        expected = reference_optimistic(num_pages, page_size, max_running, reqs, headroom)
        assert same(events, expected)
        retracted += sum(kind == "retract" for _, kind, _ in events)
    assert retracted > 100


def test_bad_arguments():
    ok = [Request(0, 0, 1, 1)]
    assert raises(simulate, 0, 1, 1, ok)
    assert raises(simulate, 1, 0, 1, ok)
    assert raises(simulate, 1, 1, 0, ok)
    assert raises(simulate, 4, 1, 1, [Request(0, -1, 1, 1)])
    assert raises(simulate, 4, 1, 1, [Request(0, 0, 0, 1)])
    assert raises(simulate, 4, 1, 1, [Request(0, 0, 1, 0)])
    assert raises(simulate, 4, 1, 1, [Request(0, 0, 1, 1), Request(0, 1, 1, 1)])
    assert raises(simulate, 4, 1, 1, ok, -1)
    assert same(simulate(4, 1, 1, ok, 0), [(0, "admit", 0), (0, "finish", 0)])
