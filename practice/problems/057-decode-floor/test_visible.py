"""057 的可见测试：题面里的示例。"""

from solution import Roof, decode_floor, decode_schedule, step_floor

ROOF = Roof(weight_bytes=1000, kv_bytes_per_token=10, flops_per_token=100,
            bandwidth=1000, flops_per_s=1000)  # fmt: skip


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def test_step_floor_memory_and_compute():
    assert close(step_floor(ROOF, 1, 5), 1.05)
    assert close(step_floor(ROOF, 20, 0), 2.0)


def test_schedule_one_at_a_time():
    assert decode_schedule([(3, 3), (2, 2)], 1) == [(1, 4), (1, 5), (1, 3)]


def test_schedule_together():
    assert decode_schedule([(3, 3), (2, 2)], 2) == [(2, 7), (1, 5)]


def test_floor_example():
    assert close(decode_floor(ROOF, [(3, 3), (2, 2)], 2), 2.12)
