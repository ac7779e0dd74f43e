"""005 的隐藏测试：GQA 分组、每个头的副本数、各种非法参数。"""

from solution import qkv_pieces


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


def _error_message(*args):
    try:
        value = qkv_pieces(*args)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"qkv_pieces{args} 应当抛出 ValueError，实际返回了 {value!r}")


CASES = [
    (16, 8, 128, 16),
    (16, 2, 64, 8),
    (32, 8, 128, 4),
    (64, 4, 128, 32),
    (12, 2, 16, 6),
    (4, 4, 8, 4),
]


def test_shapes_and_order():
    for q_heads, kv_heads, d, tp in CASES:
        for rank in range(tp):
            pieces = qkv_pieces(q_heads, kv_heads, d, tp, rank)
            assert same([p[0] for p in pieces], ["q", "k", "v"])
            q, k, v = pieces
            assert same(q[2] - q[1], q_heads // tp * d)
            assert same(k[2] - k[1], max(kv_heads // tp, 1) * d)
            assert same(k[1:], v[1:])
            assert all(p[1] % d == 0 for p in pieces), "每一段都必须从一个头的开头切"


def test_q_rows_cover_the_projection_once():
    for q_heads, kv_heads, d, tp in CASES:
        rows = []
        for rank in range(tp):
            _, start, stop = qkv_pieces(q_heads, kv_heads, d, tp, rank)[0]
            rows.extend(range(start, stop))
        assert same(rows, list(range(q_heads * d)))


def test_q_heads_find_their_kv_head_locally():
    for q_heads, kv_heads, d, tp in CASES:
        group = q_heads // kv_heads
        for rank in range(tp):
            q, k, _ = qkv_pieces(q_heads, kv_heads, d, tp, rank)
            needed = sorted({h // group for h in range(q[1] // d, q[2] // d)})
            have = list(range(k[1] // d, k[2] // d))
            assert same(needed, have), (
                f"Q={q_heads}, KV={kv_heads}, tp={tp}, rank={rank}: "
                f"Q 头需要 KV 头 {needed}，本 rank 拿到的是 {have}"
            )


def test_every_kv_head_equally_replicated():
    for q_heads, kv_heads, d, tp in CASES:
        counts = [0] * kv_heads
        for rank in range(tp):
            _, k, _ = qkv_pieces(q_heads, kv_heads, d, tp, rank)
            for h in range(k[1] // d, k[2] // d):
                counts[h] += 1
        assert same(counts, [max(tp // kv_heads, 1)] * kv_heads)


def test_bad_replication():
    message = _error_message(12, 3, 8, 4, 0)  # 3 个 KV 头复制到 4 个 rank 上
    assert "3" in message and "4" in message, message
    message = _error_message(24, 6, 8, 4, 0)  # 6 个 KV 头分给 4 个 rank
    assert "6" in message and "4" in message, message


def test_gqa_group_must_divide():
    message = _error_message(10, 4, 8, 2, 0)
    assert "10" in message and "4" in message, message


def test_invalid_arguments():
    for args in [(0, 1, 8, 1, 0), (8, 0, 8, 1, 0), (8, 8, 0, 1, 0), (8, 8, 8, 0, 0)]:
        _error_message(*args)
    for rank in [-1, 4, 9]:
        message = _error_message(8, 8, 8, 4, rank)
        assert str(rank) in message, message
    _error_message(8.0, 8, 8, 4, 0)
    _error_message(8, 8, 8, True, 0)


def test_exact_pieces_are_str_int_int_tuples():
    # 返回 list，里面每一段是 (str, int, int) 的元组；用 / 算出来的 640.0 之类不算对
    assert same(qkv_pieces(16, 8, 128, 16, 5), [("q", 640, 768), ("k", 256, 384), ("v", 256, 384)])
    assert same(qkv_pieces(4, 4, 8, 4, 0), [("q", 0, 8), ("k", 0, 8), ("v", 0, 8)])
    assert same(qkv_pieces(12, 2, 16, 6, 5), [("q", 160, 192), ("k", 16, 32), ("v", 16, 32)])
    assert same(
        qkv_pieces(64, 4, 128, 32, 31), [("q", 7936, 8192), ("k", 384, 512), ("v", 384, 512)]
    )
