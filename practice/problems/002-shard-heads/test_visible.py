"""002 的可见测试。"""

from solution import heads_of_rank, shard_heads


def _error_message(func, *args, **kwargs):
    """调用 func，要求它抛 ValueError，返回错误信息。"""
    try:
        value = func(*args, **kwargs)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_even_split():
    assert shard_heads(32, 4) == (8, 1)
    assert shard_heads(8, 8) == (1, 1)
    assert shard_heads(7, 1) == (7, 1)


def test_uneven_split_rejected():
    message = _error_message(shard_heads, 6, 4)
    assert "6" in message and "4" in message, f"错误信息应包含头数和 tp_size：{message!r}"


def test_replicate_needs_flag():
    _error_message(shard_heads, 2, 8)


def test_replicate():
    assert shard_heads(2, 8, allow_replicate=True) == (1, 4)
    assert shard_heads(4, 8, allow_replicate=True) == (1, 2)


def test_heads_of_rank_contiguous():
    assert list(heads_of_rank(32, 4, 0)) == list(range(0, 8))
    assert list(heads_of_rank(32, 4, 1)) == list(range(8, 16))
    assert list(heads_of_rank(32, 4, 3)) == list(range(24, 32))
    assert list(heads_of_rank(8, 8, 7)) == [7]
