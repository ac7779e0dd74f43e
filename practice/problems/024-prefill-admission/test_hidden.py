"""024 的隐藏测试：预留要算输出、要算运行中的请求、要算同一批先进来的请求；预算与页的边界。"""

from solution import admit_prefill, pages_needed


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


def test_pages_needed_boundaries():
    assert same([pages_needed(n, 4) for n in range(10)], [0, 1, 1, 1, 1, 2, 2, 2, 2, 3])
    assert same(pages_needed(7, 1), 7)


def test_reserve_covers_the_output_too():
    # 提示只要 1 页，但提示 + 输出要 5 页：空闲 4 页时不能放进来
    assert same(admit_prefill([(1, 4, 16)], [], 4, 4, 4, 64), ([], 64))
    assert same(admit_prefill([(1, 4, 16)], [], 4, 5, 4, 64), ([1], 60))


def test_running_requests_owe_pages():
    # 运行中的请求还欠 3 + 0 + 1 = 4 页；空闲 6 页，只能再许 2 页
    running = [(16, 1), (4, 1), (9, 2)]
    assert same(admit_prefill([(1, 5, 3)], running, 4, 6, 4, 64), ([1], 59))
    assert same(admit_prefill([(1, 5, 4)], running, 4, 6, 4, 64), ([], 64))


def test_requests_admitted_in_this_batch_are_reserved():
    # 每个请求要 2 页，空闲 5 页：只能放两个
    pending = [(1, 4, 4), (2, 4, 4), (3, 4, 4)]
    assert same(admit_prefill(pending, [], 8, 5, 4, 64), ([1, 2], 56))
    assert same(admit_prefill(pending, [], 8, 6, 4, 64), ([1, 2, 3], 52))


def test_exact_fit_of_pages():
    # 运行中的请求欠 2 页，空闲 6 页：4 页正好够
    assert same(admit_prefill([(5, 8, 8)], [(12, 1)], 1, 6, 4, 64), ([5], 56))
    assert same(admit_prefill([(5, 8, 9)], [(12, 1)], 1, 6, 4, 64), ([], 64))


def test_no_skipping_when_pages_run_out():
    pending = [(1, 2, 2), (2, 8, 40), (3, 1, 1), (4, 1, 1)]
    assert same(admit_prefill(pending, [], 8, 10, 4, 64), ([1], 62))


def test_no_skipping_when_budget_runs_out():
    pending = [(1, 10, 1), (2, 7, 1), (3, 6, 1), (4, 1, 1)]
    # uid 2 要 7 个 token、只剩 6：停下。不能让 uid 3（正好 6 个）插队
    assert same(admit_prefill(pending, [], 8, 100, 1, 16), ([1], 6))


def test_budget_exact_boundary():
    pending = [(1, 10, 1), (2, 6, 1), (3, 1, 1)]
    assert same(admit_prefill(pending, [], 8, 100, 1, 16), ([1, 2], 0))
    assert same(admit_prefill(pending, [], 8, 100, 1, 17), ([1, 2, 3], 0))
    assert same(admit_prefill(pending, [], 8, 100, 1, 15), ([1], 5))


def test_first_request_ignores_budget_but_not_pages_or_rows():
    assert same(admit_prefill([(1, 100, 1)], [], 1, 200, 1, 8), ([1], 0))
    assert same(admit_prefill([(1, 100, 1)], [], 1, 100, 1, 8), ([], 8))
    assert same(admit_prefill([(1, 100, 1)], [], 0, 200, 1, 8), ([], 8))
    # 预算正好用完：后面的请求等下一步
    assert same(admit_prefill([(1, 8, 1), (2, 1, 1)], [], 4, 200, 1, 8), ([1], 0))


def test_rows_limit():
    pending = [(i, 1, 1) for i in range(6)]
    assert same(admit_prefill(pending, [], 3, 100, 1, 64), ([0, 1, 2], 61))
    assert same(admit_prefill(pending, [], 0, 100, 1, 64), ([], 64))


def test_empty_queue_and_inputs_untouched():
    assert same(admit_prefill([], [(8, 1)], 4, 10, 4, 32), ([], 32))
    pending = [(1, 3, 3), (2, 3, 3)]
    running = [(8, 1)]
    admit_prefill(pending, running, 4, 10, 4, 32)
    assert same(pending, [(1, 3, 3), (2, 3, 3)])
    assert same(running, [(8, 1)])


def test_bad_arguments():
    _raises_value_error(admit_prefill, [(1, 3, 3)], [], 4, 10, 0, 32)
    _raises_value_error(admit_prefill, [(1, 3, 3)], [], 4, 10, 4, 0)
    _raises_value_error(admit_prefill, [(1, 3, 3)], [(8, 3)], 4, 10, 4, 32)
