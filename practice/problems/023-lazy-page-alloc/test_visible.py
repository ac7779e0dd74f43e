"""023 的可见测试。"""

from solution import PageAllocator, pages_needed


def _raises(exc_type, func, *args):
    try:
        value = func(*args)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


def test_pages_needed_example():
    assert pages_needed(9, 4) == 3
    assert pages_needed(8, 4) == 2
    assert pages_needed(0, 4) == 0


def test_prefill_then_decode():
    alloc = PageAllocator(num_pages=5, page_size=4)
    pages = []
    assert alloc.extend(pages, 0, 6) == [0, 1, 2, 3, 4, 5]
    assert pages == [0, 1]
    assert alloc.extend(pages, 6, 7) == [6]
    assert alloc.extend(pages, 7, 8) == [7]
    assert pages == [0, 1]
    assert alloc.extend(pages, 8, 9) == [8]
    assert pages == [0, 1, 2]
    assert alloc.available_pages == 2


def test_free_and_double_free():
    alloc = PageAllocator(num_pages=5, page_size=4)
    pages = []
    alloc.extend(pages, 0, 9)
    alloc.free(pages)
    assert alloc.available_pages == 5
    _raises(ValueError, alloc.free, [1])
