"""026 的隐藏测试：预算共用、被切开的请求留在队头、边界、各种预算下的不变量。"""

from solution import chunk_schedule


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


def test_budget_1_is_one_token_per_step():
    steps = chunk_schedule([(3, 2), (4, 1)], 1)
    assert same(steps, [[(3, 0, 1)], [(3, 1, 2)], [(4, 0, 1)]])


def test_budget_16():
    assert same(
        chunk_schedule([(0, 10), (1, 3), (2, 20)], 16),
        [
            [(0, 0, 10), (1, 0, 3), (2, 0, 3)],
            [(2, 3, 19)],
            [(2, 19, 20)],
        ],
    )


def test_chunked_request_stays_at_the_head():
    # uid 7 被切开之后，下一步先接着算它，而不是先算后面的短请求
    assert same(
        chunk_schedule([(7, 9), (8, 2), (9, 2)], 4),
        [
            [(7, 0, 4)],
            [(7, 4, 8)],
            [(7, 8, 9), (8, 0, 2), (9, 0, 1)],
            [(9, 1, 2)],
        ],
    )


def test_budget_is_shared_within_a_step():
    steps = chunk_schedule([(1, 5), (2, 5), (3, 5)], 6)
    assert same(steps, [[(1, 0, 5), (2, 0, 1)], [(2, 1, 5), (3, 0, 2)], [(3, 2, 5)]])
    for step in steps:
        assert sum(end - start for _, start, end in step) <= 6


def test_exact_multiple_leaves_no_empty_chunk():
    assert same(
        chunk_schedule([(1, 3), (2, 3), (3, 6)], 6),
        [
            [(1, 0, 3), (2, 0, 3)],
            [(3, 0, 6)],
        ],
    )
    assert same(chunk_schedule([(1, 8)], 4), [[(1, 0, 4)], [(1, 4, 8)]])


def test_long_prompt_alone():
    steps = chunk_schedule([(42, 23)], 5)
    assert same(steps, [[(42, s, min(s + 5, 23))] for s in range(0, 23, 5)])


def test_invariants_for_many_budgets():
    prompts = [(u, 1 + (u * 37) % 29) for u in range(9)]
    total = sum(n for _, n in prompts)
    for budget in (1, 2, 3, 7, 10, 64, 1000):
        steps = chunk_schedule(prompts, budget)
        assert same(len(steps), -(-total // budget))
        covered = {u: 0 for u, _ in prompts}
        order = []
        for step in steps:
            assert step
            assert sum(e - s for _, s, e in step) <= budget
            for uid, start, end in step:
                assert start == covered[uid] and start < end
                covered[uid] = end
                if not order or order[-1] != uid:
                    order.append(uid)
        assert same(covered, dict(prompts))
        assert same(order, [u for u, _ in prompts])  # 按到达顺序，每个请求的块连在一起


def test_empty_and_input_untouched():
    assert same(chunk_schedule([], 8), [])
    prompts = [(1, 5), (2, 5)]
    chunk_schedule(prompts, 3)
    assert same(prompts, [(1, 5), (2, 5)])


def test_bad_arguments():
    _raises_value_error(chunk_schedule, [(1, 5)], 0)
    _raises_value_error(chunk_schedule, [(1, 5), (2, 0)], 4)


def test_queue_order_is_arrival_not_uid():
    # 队列按到达顺序，和 uid 的大小无关
    assert same(
        chunk_schedule([(9, 3), (2, 2), (5, 1)], 4),
        [[(9, 0, 3), (2, 0, 1)], [(2, 1, 2), (5, 0, 1)]],
    )
