"""008 的可见测试。"""

import math

from solution import inv_freq

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 1024,
}


def _close(got, want):
    assert len(got) == len(want), f"长度应为 {len(want)}，得到 {len(got)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert math.isclose(g, w, rel_tol=1e-9), f"第 {i} 项：期望 {w!r}，得到 {g!r}"


def test_default():
    _close(inv_freq(8, 10000.0), [1.0, 0.1, 0.01, 0.001])
    _close(inv_freq(4, 100.0), [1.0, 0.1])
    _close(inv_freq(8, 10000.0, {"rope_type": "default"}), [1.0, 0.1, 0.01, 0.001])


def test_linear():
    _close(inv_freq(8, 10000.0, {"rope_type": "linear", "factor": 2.0}), [0.5, 0.05, 0.005, 0.0005])


def test_llama3_small():
    smooth = (1024 / (2 * math.pi / 0.01) - 1) / 3
    middle = (1 - smooth) * 0.01 / 8 + smooth * 0.01
    _close(inv_freq(8, 10000.0, LLAMA3), [1.0, 0.1, middle, 0.001 / 8])


def test_unknown_type():
    try:
        inv_freq(6, 10000.0, {"rope_type": "dynamic", "factor": 2.0})
    except ValueError as exc:
        assert "dynamic" in str(exc), f"错误信息里应该有 dynamic：{exc}"
    else:
        raise AssertionError("rope_type='dynamic' 应当抛出 ValueError")
