"""052 的可见测试：题面里的示例。"""

from solution import AccountingError, Books, audit, is_idle


def test_example_returns_to_idle():
    log = [
        ("admit", 10, 0, [0, 1, 2], []),
        ("alloc", 10, [3]),
        ("end", 10, [0, 1, 2], [3]),
        ("admit", 11, 1, [4], [0, 1]),
        ("evict", [2]),
        ("end", 11, [4], []),
    ]
    books = audit(8, 2, log)
    assert books == Books(free=5, cached=3, locked=0, held=0, leaked=(), running=(), rows_free=2)
    assert is_idle(books, 8, 2)


def test_leak_and_double_end():
    leak = [("admit", 1, 0, [0, 1], []), ("alloc", 1, [2]), ("end", 1, [0, 1], [])]
    books = audit(4, 1, leak)
    assert books == Books(free=1, cached=2, locked=0, held=0, leaked=(2,), running=(), rows_free=1)
    assert not is_idle(books, 4, 1)
    try:
        audit(4, 1, leak + [("end", 1, [], [2])])
    except AccountingError as e:
        assert str(e).startswith("event 3:")
    else:
        raise AssertionError("ending uid 1 twice must raise AccountingError")
