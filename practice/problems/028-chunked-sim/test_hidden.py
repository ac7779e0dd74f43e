"""028 的隐藏测试：独立的检查器逐步核对块、预算、行数、空闲页与预留，再对几组预算核对步数。"""

from solution import simulate


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


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"应当抛出 ValueError，实际返回了 {value!r}")


def _pages(n, page_size):
    return -(-n // page_size)


def _check(reqs, trace, num_pages, page_size, max_running, budget):
    """不依赖参考答案的检查：从 trace 重建每个请求的状态，核对题面的每条规则。"""
    info = {uid: (p, o) for uid, p, o in reqs}
    kv = {}  # uid -> KV 里已有的 token 数
    gen = {}
    done = set()
    started = []
    for number, (kind, rows, free) in enumerate(trace):
        where = f"第 {number} 步 {kind} {rows}"
        assert kind in ("prefill", "decode"), where
        assert rows, where
        uids = [r[0] for r in rows]
        assert same(len(set(uids)), len(uids)), where
        alive_before = [u for u in kv if u not in done]
        if kind == "prefill":
            assert sum(e - s for _, s, e in rows) <= budget, where
        else:
            # decode 步：所有 prefill 已完成、还没结束的请求一起，按加入 decode 的顺序
            ready = [u for u in alive_before if kv[u] >= info[u][0]]
            assert same(sorted(uids), sorted(ready)), where
        for uid, s, e in rows:
            p, o = info[uid]
            assert uid not in done, where
            assert s == kv.get(uid, 0) and e > s, where
            if kind == "prefill":
                assert e <= p, where
                if s == 0:
                    started.append(uid)
                if e == p:
                    gen[uid] = 1
            else:
                assert s >= p and e == s + 1, where
                gen[uid] += 1
            kv[uid] = e
        alive = [u for u in kv if u not in done]
        assert len(alive) <= max_running, f"{where}：同时进门的请求超过了 {max_running} 个"
        # 预留保证：已进门请求的最大页数之和不超过整个池子
        assert sum(_pages(sum(info[u]), page_size) for u in alive) <= num_pages, where
        for uid in uids:
            if gen.get(uid, 0) == info[uid][1]:
                done.add(uid)
        used = sum(_pages(kv[u], page_size) for u in kv if u not in done)
        assert same(free, num_pages - used), f"{where}：空闲页应为 {num_pages - used}，得到 {free}"
    assert same(done, set(info))
    assert same(started, [uid for uid, _, _ in reqs])  # 先到先进门
    assert same(free, num_pages)


def _chunk_plan(prompts, budget):
    """没有页和行的压力时，prefill 步就是按预算切块（同 026）。"""
    queue = [[u, p, 0] for u, p in prompts]
    steps = []
    while queue:
        left, batch = budget, []
        while queue and left:
            u, p, d = queue[0]
            n = min(left, p - d)
            batch.append((u, d, d + n))
            left -= n
            if d + n == p:
                queue.pop(0)
            else:
                queue[0][2] = d + n
        steps.append(batch)
    return steps


MIXED = [(0, 13, 4), (1, 2, 2), (2, 9, 1), (3, 5, 6), (4, 20, 3), (5, 1, 5)]


def test_budgets_1_7_64_tight_pool():
    counts = {}
    for budget in (1, 7, 64):
        trace = simulate(MIXED, 16, 4, 3, budget)
        _check(MIXED, trace, 16, 4, 3, budget)
        kinds = [k for k, _, _ in trace]
        counts[budget] = (kinds.count("prefill"), kinds.count("decode"))
    assert same(counts, {1: (50, 7), 7: (9, 7), 64: (4, 7)})


def test_budget_7_full_trace():
    assert same(
        simulate(MIXED, 16, 4, 3, 7),
        [
            ("prefill", [(0, 0, 7)], 14),
            ("prefill", [(0, 7, 13), (1, 0, 1)], 11),
            ("prefill", [(1, 1, 2), (2, 0, 6)], 9),
            ("prefill", [(2, 6, 9)], 11),  # 3 行都占着：uid 3 等着
            ("prefill", [(3, 0, 5)], 9),
            ("decode", [(0, 13, 14), (1, 2, 3), (3, 5, 6)], 10),
            ("prefill", [(4, 0, 7)], 8),
            ("prefill", [(4, 7, 14)], 6),
            ("prefill", [(4, 14, 20)], 5),
            ("decode", [(0, 14, 15), (3, 6, 7), (4, 20, 21)], 4),
            ("decode", [(0, 15, 16), (3, 7, 8), (4, 21, 22)], 14),
            ("prefill", [(5, 0, 1)], 13),
            ("decode", [(3, 8, 9), (5, 1, 2)], 12),
            ("decode", [(3, 9, 10), (5, 2, 3)], 15),
            ("decode", [(5, 3, 4)], 15),
            ("decode", [(5, 4, 5)], 16),
        ],
    )


def test_budgets_many_rows_and_pages():
    for budget in (1, 2, 3, 7, 10, 64):
        trace = simulate(MIXED, 1000, 4, 100, budget)
        _check(MIXED, trace, 1000, 4, 100, budget)
        prefill = [rows for kind, rows, _ in trace if kind == "prefill"]
        plan = _chunk_plan([(u, p) for u, p, _ in MIXED], budget)
        assert same(prefill, plan)
        # 没有压力时先把所有 prefill 做完，再一起 decode
        assert same([k for k, _, _ in trace], ["prefill"] * len(plan) + ["decode"] * 5)


def test_page_size_one_and_small_pool():
    reqs = [(7, 5, 3), (8, 4, 4), (9, 3, 2)]
    for budget in (1, 3, 4, 100):
        for rows in (1, 2, 3):
            trace = simulate(reqs, 9, 1, rows, budget)
            _check(reqs, trace, 9, 1, rows, budget)


def test_chunked_request_reservation_exact():
    # page_size = 1：uid 0 最多 8 页；预算 4。第 2 步 uid 0 算完最后一块，还欠 2 页，
    # 空闲 6 页只能再许 4 页：uid 1 要 5 页，进不来
    reqs = [(0, 6, 2), (1, 3, 2)]
    assert same(
        simulate(reqs, 10, 1, 4, 4),
        [
            ("prefill", [(0, 0, 4)], 6),
            ("prefill", [(0, 4, 6)], 4),
            ("decode", [(0, 6, 7)], 10),
            ("prefill", [(1, 0, 3)], 7),
            ("decode", [(1, 3, 4)], 10),
        ],
    )


def test_reservation_of_a_chunk_that_is_not_finished():
    # uid 0 最多 12 个 token，要占满整个池子（6 页）。它被切开期间一直欠着页：
    # 第 3 步它算完最后一块、预算还剩 3，uid 1 只要 2 页，空闲也有 2 页——但都已经许给了 uid 0
    reqs = [(0, 9, 3), (1, 2, 1), (2, 1, 1)]
    assert same(
        simulate(reqs, 6, 2, 4, 4),
        [
            ("prefill", [(0, 0, 4)], 4),
            ("prefill", [(0, 4, 8)], 2),
            ("prefill", [(0, 8, 9)], 1),
            ("decode", [(0, 9, 10)], 1),
            ("decode", [(0, 10, 11)], 6),
            ("prefill", [(1, 0, 2), (2, 0, 1)], 6),
        ],
    )


def test_lazy_allocation_in_decode():
    trace = simulate([(1, 3, 6)], 3, 4, 1, 8)
    assert same(
        trace,
        [
            ("prefill", [(1, 0, 3)], 2),
            ("decode", [(1, 3, 4)], 2),
            ("decode", [(1, 4, 5)], 1),
            ("decode", [(1, 5, 6)], 1),
            ("decode", [(1, 6, 7)], 1),
            ("decode", [(1, 7, 8)], 3),
        ],
    )


def test_output_len_one_never_decodes():
    reqs = [(1, 5, 1), (2, 3, 1), (3, 4, 1)]
    assert same(
        simulate(reqs, 4, 2, 2, 6),
        [
            ("prefill", [(1, 0, 5)], 4),
            ("prefill", [(2, 0, 3)], 4),
            ("prefill", [(3, 0, 4)], 4),
        ],
    )
    # 池子大一些：一批里放得下两个，第二个被切开、下一步接着算；结束的请求当场还页
    assert same(
        simulate(reqs, 10, 2, 3, 6),
        [
            ("prefill", [(1, 0, 5), (2, 0, 1)], 9),  # 被切开的 uid 2 拿着 1 页
            ("prefill", [(2, 1, 3), (3, 0, 4)], 10),
        ],
    )


def test_head_of_line_blocking():
    # uid 1 要 9 页，要等 uid 0 结束；uid 2 只要 2 页，也不能插到 uid 1 前面。
    # uid 1 进门的那一步，uid 2 又因为 uid 1 刚预留的 9 页进不来
    reqs = [(0, 2, 3), (1, 8, 1), (2, 1, 1)]
    trace = simulate(reqs, 10, 1, 4, 16)
    assert same(
        trace,
        [
            ("prefill", [(0, 0, 2)], 8),
            ("decode", [(0, 2, 3)], 7),
            ("decode", [(0, 3, 4)], 10),
            ("prefill", [(1, 0, 8)], 10),
            ("prefill", [(2, 0, 1)], 10),
        ],
    )


def test_empty_and_bad_arguments():
    assert same(simulate([], 4, 2, 2, 4), [])
    _raises_value_error(simulate, [(0, 3, 1)], 0, 2, 2, 4)
    _raises_value_error(simulate, [(0, 3, 1)], 4, 0, 2, 4)
    _raises_value_error(simulate, [(0, 3, 1)], 4, 2, 0, 4)
    _raises_value_error(simulate, [(0, 3, 1)], 4, 2, 2, 0)
    _raises_value_error(simulate, [(0, 0, 1)], 4, 2, 2, 4)
    _raises_value_error(simulate, [(0, 3, 0)], 4, 2, 2, 4)
    _raises_value_error(simulate, [(0, 3, 1), (0, 2, 1)], 4, 2, 2, 4)
    _raises_value_error(simulate, [(0, 7, 2)], 4, 2, 2, 4)  # 9 个 token 要 5 页
    assert same(simulate([(0, 6, 2)], 4, 2, 1, 100)[-1][2], 4)  # 8 个 token 正好 4 页


def test_arrival_order_not_uid_order():
    # 等待队列按到达顺序，uid 的大小不起作用
    reqs = [(50, 6, 2), (7, 3, 3), (23, 2, 1), (1, 4, 2)]
    for budget in (1, 4, 64):
        for rows in (1, 2, 4):
            trace = simulate(reqs, 8, 2, rows, budget)
            _check(reqs, trace, 8, 2, rows, budget)
