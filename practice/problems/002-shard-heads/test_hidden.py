"""002 的隐藏测试：复制时的分配、GQA 对齐与各种非法参数。"""

from solution import heads_of_rank, shard_heads


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


def _error_message(func, *args, **kwargs):
    """调用 func，要求它抛 ValueError，返回错误信息。"""
    try:
        value = func(*args, **kwargs)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"{func.__name__}{args} 应当抛出 ValueError，实际返回了 {value!r}")


def _heads(num_heads, tp_size, allow_replicate=False):
    """每个 rank 的头号列表；顺带检查 heads_of_rank 返回 range 或 list，里面是 int。"""
    result = []
    for r in range(tp_size):
        heads = heads_of_rank(num_heads, tp_size, r, allow_replicate)
        assert type(heads) in (range, list), f"应返回 range 或 list，得到 {type(heads).__name__}"
        assert all(type(h) is int for h in heads), f"头的编号应是 int：{heads!r}"
        result.append(list(heads))
    return result


def test_replicated_neighbours_share_a_head():
    assert same(_heads(2, 8, True), [[0]] * 4 + [[1]] * 4)
    assert same(_heads(1, 4, True), [[0]] * 4)
    assert same(_heads(3, 6, True), [[0], [0], [1], [1], [2], [2]])


def test_gqa_groups_stay_on_their_rank():
    # (Q 头数, KV 头数, tp_size)：每个 rank 上的 Q 头所属的 KV 组都必须在本 rank 上
    for num_q, num_kv, tp_size in [(16, 2, 8), (32, 8, 4), (32, 8, 16), (64, 4, 32), (12, 2, 6)]:
        group = num_q // num_kv
        for rank in range(tp_size):
            q_heads = list(heads_of_rank(num_q, tp_size, rank))
            kv_heads = list(heads_of_rank(num_kv, tp_size, rank, allow_replicate=True))
            needed = sorted({q // group for q in q_heads})
            assert same(needed, kv_heads), (
                f"Q={num_q}, KV={num_kv}, tp={tp_size}, rank={rank}: "
                f"Q 头 {q_heads} 需要 KV 头 {needed}，但本 rank 拿到的是 {kv_heads}"
            )


def test_every_head_has_the_right_number_of_copies():
    for num_heads, tp_size, allow in [(32, 4, False), (5, 5, False), (2, 8, True), (3, 12, True)]:
        per_rank, replicas = shard_heads(num_heads, tp_size, allow)
        counts = [0] * num_heads
        for heads in _heads(num_heads, tp_size, allow):
            assert same(len(heads), per_rank)
            for h in heads:
                counts[h] += 1
        assert same(counts, [replicas] * num_heads)


def test_replicate_requires_divisible_tp():
    for num_heads, tp_size in [(3, 4), (4, 6), (3, 8), (5, 7)]:
        message = _error_message(shard_heads, num_heads, tp_size, allow_replicate=True)
        assert str(num_heads) in message and str(tp_size) in message, message


def test_replicate_only_when_heads_are_fewer():
    assert same(shard_heads(32, 4, allow_replicate=True), (8, 1))
    assert same(shard_heads(4, 4, allow_replicate=True), (1, 1))
    _error_message(shard_heads, 6, 4, allow_replicate=True)
    _error_message(shard_heads, 10, 4, allow_replicate=True)


def test_tp_size_one():
    assert same(shard_heads(5, 1), (5, 1))
    assert same(list(heads_of_rank(5, 1, 0)), [0, 1, 2, 3, 4])


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


def test_results_are_int_tuples():
    # 用 / 而不是 // 会得到 (8.0, 1)：8.0 == 8，只比 == 看不出来
    for args, want in [
        ((32, 4), (8, 1)),
        ((6, 3), (2, 1)),
        ((2, 8, True), (1, 4)),
        ((1, 1), (1, 1)),
    ]:
        assert same(shard_heads(*args), want), f"shard_heads{args} 应返回 {want!r}"
    assert same(_heads(6, 3), [[0, 1], [2, 3], [4, 5]])
