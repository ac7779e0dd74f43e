"""057 的隐藏测试：补位的时机、不需要 decode 的请求、和逐个 token 模拟的对照、参数检查。"""

import random

from solution import Roof, decode_floor, decode_schedule, step_floor


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


ROOF = Roof(weight_bytes=1000, kv_bytes_per_token=10, flops_per_token=100,
            bandwidth=1000, flops_per_s=1000)  # fmt: skip


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(b))


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def reference(requests, max_batch):
    """另一种算法：按顺序给每个请求找开始的那一步——不早于前一个请求，而且那一步正在 decode 的
    请求少于 max_batch；再把每个请求每一步读的 KV 加到对应的步上。"""
    spans = []  # (开始的步, 步数)
    prev = 0
    for p, out in requests:
        n = out - 1
        if n == 0:
            continue
        s = prev
        while sum(1 for b, m, _ in spans if b <= s < b + m) >= max_batch:
            s += 1
        spans.append((s, n, p))
        prev = s
    per_step = {}
    for b, n, p in spans:
        for k in range(n):
            size, kv = per_step.get(b + k, (0, 0))
            per_step[b + k] = (size + 1, kv + p + 1 + k)
    return [per_step[s] for s in sorted(per_step)]


def test_freed_slot_is_refilled_at_the_next_step():
    # 第一个请求只走 1 步；第三个请求应该在第 2 步就补进来，而不是第 3 步
    reqs = [(4, 2), (4, 4), (4, 3)]
    assert same(decode_schedule(reqs, 2), [(2, 10), (2, 11), (2, 13)])


def test_single_token_requests_take_no_slot():
    reqs = [(2, 1), (2, 3), (2, 1), (2, 3)]
    assert same(decode_schedule(reqs, 2), [(2, 6), (2, 8)])
    assert same(decode_schedule([(5, 1), (9, 1)], 3), [])
    got = decode_floor(ROOF, [(5, 1)], 1)  # 一步也没有：空的和，0 或 0.0 都行
    assert type(got) in (int, float) and got == 0, got


def test_matches_reference_on_random_workloads():
    rng = random.Random(57)
    for _ in range(200):
        reqs = [(rng.randint(1, 30), rng.randint(1, 12)) for _ in range(rng.randint(0, 12))]
        max_batch = rng.randint(1, 6)
        assert same(decode_schedule(reqs, max_batch), reference(reqs, max_batch)), (reqs, max_batch)


def test_total_tokens_conserved():
    rng = random.Random(5)
    reqs = [(rng.randint(1, 50), rng.randint(1, 40)) for _ in range(30)]
    steps = decode_schedule(reqs, 7)
    assert same(sum(b for b, _ in steps), sum(out - 1 for _, out in reqs))
    want_kv = sum(sum(p + 1 + k for k in range(out - 1)) for p, out in reqs)
    assert same(sum(kv for _, kv in steps), want_kv)
    assert all(1 <= b <= 7 for b, _ in steps)


def test_big_batch_all_start_together():
    reqs = [(10, 5), (20, 3), (30, 4)]
    assert same(decode_schedule(reqs, 256), [(3, 63), (3, 66), (2, 46), (1, 14)])


def test_floor_is_sum_of_max_not_sum_of_both():
    roof = Roof(weight_bytes=500, kv_bytes_per_token=1, flops_per_token=1000,
                bandwidth=1000, flops_per_s=1000)  # fmt: skip
    # 一步 3 个请求：读 0.5 + kv/1000 秒，算 3 秒 → 算力说了算
    got = decode_floor(roof, [(1, 2), (1, 2), (1, 2)], 3)
    assert close(got, 3.0)
    # 一个请求：读 0.502 秒，算 1 秒
    assert close(decode_floor(roof, [(1, 2)], 3), 1.0)


def test_weights_read_once_per_step_not_per_request():
    roof = Roof(weight_bytes=1000, kv_bytes_per_token=0, flops_per_token=0,
                bandwidth=1000, flops_per_s=1)  # fmt: skip
    assert close(decode_floor(roof, [(1, 11)] * 8, 8), 10.0)  # 10 步，每步 1 秒
    assert close(decode_floor(roof, [(1, 11)] * 8, 1), 80.0)


def test_floor_matches_steps():
    rng = random.Random(9)
    reqs = [(rng.randint(1, 100), rng.randint(1, 20)) for _ in range(25)]
    want = sum(step_floor(ROOF, b, kv) for b, kv in decode_schedule(reqs, 4))
    assert close(decode_floor(ROOF, reqs, 4), want)


def test_rejects_bad_input():
    assert raises(step_floor, ROOF, 0, 5)
    assert raises(step_floor, ROOF, 1, -1)
    assert raises(decode_schedule, [(3, 3)], 0)
    assert raises(decode_schedule, [(0, 3)], 1)
    assert raises(decode_schedule, [(3, 0)], 1)
