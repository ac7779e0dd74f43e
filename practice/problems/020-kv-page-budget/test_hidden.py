"""020 的隐藏测试：预算超过空闲量、明确的页数不截断、优先级、边界与非法参数。"""

from solution import kv_bytes_per_page, page_table_pages, plan_num_pages


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


GiB = 1 << 30
MiB = 1 << 20


def _raises(exc_type, func, *args, **kwargs):
    try:
        value = func(*args, **kwargs)
    except NotImplementedError:
        raise  # 它也是 RuntimeError 的子类：还没实现不能算"内存不够"
    except exc_type:
        return
    raise AssertionError(f"{func.__name__} 应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_budget_never_exceeds_free():
    plan = plan_num_pages(
        free=1 * GiB, total=80 * GiB, bytes_per_page=MiB, memory_fraction=0.9, memory_budget=3 * GiB
    )
    assert same(plan, (1024, "memory_budget", False))


def test_budget_ignores_fraction_reserve():
    # 字节预算不再留出 (1 - fraction) * total：空闲 7 GiB 时按 fraction 会报错，按预算正好 2 GiB
    plan = plan_num_pages(
        free=7 * GiB, total=80 * GiB, bytes_per_page=MiB, memory_fraction=0.9, memory_budget=2 * GiB
    )
    assert same(plan, (2048, "memory_budget", False))


def test_explicit_num_pages_is_never_capped():
    plan = plan_num_pages(
        free=70 * GiB,
        total=80 * GiB,
        bytes_per_page=MiB,
        memory_fraction=0.9,
        num_pages=1000,
        max_useful_pages=100,
    )
    assert same(plan, (1000, "num_pages", False))


def test_priority_with_everything_given():
    kwargs = dict(free=70 * GiB, total=80 * GiB, bytes_per_page=MiB, memory_fraction=0.9)
    assert same(plan_num_pages(**kwargs, memory_budget=GiB, num_pages=3), (3, "num_pages", False))
    assert same(plan_num_pages(**kwargs, memory_budget=GiB), (1024, "memory_budget", False))
    assert same(plan_num_pages(**kwargs), (62 * 1024, "memory_fraction", False))


def test_reserve_comes_from_total_not_free():
    # 空闲 60 GiB、总量 80 GiB：留出的是 8 GiB（总量的 10%），不是 6 GiB（空闲量的 10%）
    plan = plan_num_pages(free=60 * GiB, total=80 * GiB, bytes_per_page=GiB, memory_fraction=0.9)
    assert same(plan, (52, "memory_fraction", False))


def test_fraction_one_reserves_nothing():
    plan = plan_num_pages(free=10 * MiB + 7, total=GiB, bytes_per_page=MiB, memory_fraction=1.0)
    assert same(plan, (10, "memory_fraction", False))


def test_exactly_one_page_and_just_below():
    kw = dict(total=100, bytes_per_page=10, memory_fraction=0.5)
    assert same(plan_num_pages(free=60, **kw), (1, "memory_fraction", False))
    _raises(RuntimeError, plan_num_pages, free=59, **kw)
    _raises(RuntimeError, plan_num_pages, free=10, **kw)  # 可用量为负


def test_cap_only_when_strictly_more():
    kw = dict(free=1000, total=1000, bytes_per_page=10, memory_fraction=1.0)
    assert same(plan_num_pages(**kw, max_useful_pages=100), (100, "memory_fraction", False))
    assert same(plan_num_pages(**kw, max_useful_pages=99), (99, "memory_fraction", True))
    assert same(plan_num_pages(**kw, max_useful_pages=500), (100, "memory_fraction", False))


def test_budget_can_be_capped():
    plan = plan_num_pages(
        free=GiB,
        total=GiB,
        bytes_per_page=MiB,
        memory_fraction=0.9,
        memory_budget=512 * MiB,
        max_useful_pages=8,
    )
    assert same(plan, (8, "memory_budget", True))


def test_budget_smaller_than_a_page():
    _raises(
        RuntimeError,
        plan_num_pages,
        free=GiB,
        total=GiB,
        bytes_per_page=MiB,
        memory_fraction=0.9,
        memory_budget=MiB - 1,
    )


def test_bad_plan_arguments():
    kw = dict(free=GiB, total=GiB, bytes_per_page=MiB, memory_fraction=0.9)
    _raises(ValueError, plan_num_pages, **{**kw, "bytes_per_page": 0})
    _raises(ValueError, plan_num_pages, **{**kw, "memory_fraction": 0.0})
    _raises(ValueError, plan_num_pages, **{**kw, "memory_fraction": 1.5})
    _raises(ValueError, plan_num_pages, **kw, num_pages=0)
    _raises(ValueError, plan_num_pages, **kw, memory_budget=0)
    _raises(ValueError, plan_num_pages, **{**kw, "memory_fraction": -0.1}, num_pages=4)


def test_bytes_per_page_variants():
    assert same(kv_bytes_per_page(1, 1, 1, 1, 1), 2)
    assert same(kv_bytes_per_page(28, 4, 128, 16, 2), 2 * 28 * 16 * 4 * 128 * 2)  # tp=2：KV 头减半
    assert same(kv_bytes_per_page(28, 4, 128, 1, 2) * 2, kv_bytes_per_page(28, 8, 128, 1, 2))


def test_bad_bytes_per_page_arguments():
    for bad in [(0, 8, 128, 1, 2), (28, 0, 128, 1, 2), (28, 8, 0, 1, 2), (28, 8, 128, 0, 2)]:
        _raises(ValueError, kv_bytes_per_page, *bad)
    _raises(ValueError, kv_bytes_per_page, 28, 8, 128, 1, 0)


def test_page_table_pages_rounding():
    assert same(page_table_pages(1, 1, 16), 1)
    assert same(page_table_pages(3, 16, 16), 3)
    assert same(page_table_pages(3, 17, 16), 6)
    assert same(page_table_pages(64, 40960, 1), 64 * 40960)


def test_bad_page_table_arguments():
    _raises(ValueError, page_table_pages, 0, 10, 4)
    _raises(ValueError, page_table_pages, 2, 0, 4)
    _raises(ValueError, page_table_pages, 2, 10, 0)
