"""002 的隐藏测试：复制时的分配、GQA 对齐与各种非法参数。"""

from solution import heads_of_rank, shard_heads


def _error_message(func, *args, **kwargs):
    """调用 func，要求它抛 ValueError，返回错误信息。"""
    try:
        value = func(*args, **kwargs)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


def _heads(num_heads, tp_size, allow_replicate=False):
    return [list(heads_of_rank(num_heads, tp_size, r, allow_replicate)) for r in range(tp_size)]


def test_replicated_neighbours_share_a_head():
    assert _heads(2, 8, True) == [[0]] * 4 + [[1]] * 4
    assert _heads(1, 4, True) == [[0]] * 4
    assert _heads(3, 6, True) == [[0], [0], [1], [1], [2], [2]]


def test_gqa_groups_stay_on_their_rank():
    # (Q 头数, KV 头数, tp_size)：每个 rank 上的 Q 头所属的 KV 组都必须在本 rank 上
    for num_q, num_kv, tp_size in [(16, 2, 8), (32, 8, 4), (32, 8, 16), (64, 4, 32), (12, 2, 6)]:
        group = num_q // num_kv
        for rank in range(tp_size):
            q_heads = list(heads_of_rank(num_q, tp_size, rank))
            kv_heads = list(heads_of_rank(num_kv, tp_size, rank, allow_replicate=True))
            needed = sorted({q // group for q in q_heads})
            assert needed == kv_heads, (
                f"Q={num_q}, KV={num_kv}, tp={tp_size}, rank={rank}: "
                f"Q 头 {q_heads} 需要 KV 头 {needed}，但本 rank 拿到的是 {kv_heads}"
            )


def test_every_head_has_the_right_number_of_copies():
    for num_heads, tp_size, allow in [(32, 4, False), (5, 5, False), (2, 8, True), (3, 12, True)]:
        per_rank, replicas = shard_heads(num_heads, tp_size, allow)
        counts = [0] * num_heads
        for heads in _heads(num_heads, tp_size, allow):
            assert len(heads) == per_rank
            for h in heads:
                counts[h] += 1
        assert counts == [replicas] * num_heads


def test_replicate_requires_divisible_tp():
    for num_heads, tp_size in [(3, 4), (4, 6), (3, 8), (5, 7)]:
        message = _error_message(shard_heads, num_heads, tp_size, allow_replicate=True)
        assert str(num_heads) in message and str(tp_size) in message, message


def test_replicate_only_when_heads_are_fewer():
    assert shard_heads(32, 4, allow_replicate=True) == (8, 1)
    assert shard_heads(4, 4, allow_replicate=True) == (1, 1)
    _error_message(shard_heads, 6, 4, allow_replicate=True)
    _error_message(shard_heads, 10, 4, allow_replicate=True)


def test_tp_size_one():
    assert shard_heads(5, 1) == (5, 1)
    assert list(heads_of_rank(5, 1, 0)) == [0, 1, 2, 3, 4]


def test_non_positive_sizes():
    for args in [(0, 1), (4, 0), (-2, 2), (4, -1), (0, 0)]:
        _error_message(shard_heads, *args)
        _error_message(shard_heads, *args, allow_replicate=True)


def test_rank_out_of_range():
    for rank in [-1, 4, 5]:
        _error_message(heads_of_rank, 8, 4, rank)
        _error_message(heads_of_rank, 2, 4, rank, allow_replicate=True)


def test_heads_of_rank_rejects_bad_split():
    _error_message(heads_of_rank, 6, 4, 0)
    _error_message(heads_of_rank, 2, 8, 0)
