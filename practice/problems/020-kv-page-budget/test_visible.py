"""020 的可见测试。"""

from solution import kv_bytes_per_page, page_table_pages, plan_num_pages

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


def test_bytes_per_page_qwen3():
    assert kv_bytes_per_page(28, 8, 128, 1, 2) == 114688


def test_bytes_per_page_grows_with_page_size():
    assert kv_bytes_per_page(2, 2, 32, 4, 4) == 2 * 2 * 4 * 2 * 32 * 4


def test_page_table_pages():
    assert page_table_pages(8, 256, 4) == 512
    assert page_table_pages(2, 10, 4) == 6


def test_fraction_example():
    plan = plan_num_pages(free=78 * GiB, total=80 * GiB, bytes_per_page=114688, memory_fraction=0.9)
    assert plan == (655360, "memory_fraction", False)


def test_budget_example():
    plan = plan_num_pages(
        free=70 * GiB,
        total=80 * GiB,
        bytes_per_page=MiB,
        memory_fraction=0.9,
        memory_budget=3 * GiB + 5,
    )
    assert plan == (3072, "memory_budget", False)


def test_capped_by_page_table():
    plan = plan_num_pages(
        free=20 * GiB,
        total=24 * GiB,
        bytes_per_page=4096,
        memory_fraction=0.9,
        max_useful_pages=512,
    )
    assert plan == (512, "memory_fraction", True)


def test_explicit_num_pages():
    plan = plan_num_pages(free=0, total=0, bytes_per_page=MiB, memory_fraction=0.9, num_pages=7)
    assert plan == (7, "num_pages", False)


def test_not_enough_memory():
    _raises(
        RuntimeError,
        plan_num_pages,
        free=5 * GiB,
        total=80 * GiB,
        bytes_per_page=MiB,
        memory_fraction=0.9,
    )
