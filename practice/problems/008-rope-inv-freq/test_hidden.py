"""008 的隐藏测试：Llama 3.1 的真实配置、参数检查、各种边界。"""

import math

from solution import inv_freq


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


LLAMA31 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def _raises(*args):
    try:
        value = inv_freq(*args)
    except ValueError:
        return
    raise AssertionError(f"inv_freq{args} 应当抛出 ValueError，实际返回了 {value!r}")


def test_llama31_three_segments():
    raw = inv_freq(128, 500000.0)
    got = inv_freq(128, 500000.0, LLAMA31)
    assert same(len(got), 64)
    kept = [i for i in range(64) if got[i] == raw[i]]
    scaled = [i for i in range(64) if math.isclose(got[i], raw[i] / 8, rel_tol=1e-12)]
    assert same(kept, list(range(29))), f"应当保持不变的是前 29 项，得到 {kept}"
    assert same(scaled, list(range(35, 64))), f"应当除以 8 的是后 29 项，得到 {scaled}"
    for i in range(29, 35):  # 过渡段：严格介于两者之间
        assert raw[i] / 8 < got[i] < raw[i], f"第 {i} 项 {got[i]} 不在过渡段里"


def test_llama31_values():
    got = inv_freq(128, 500000.0, LLAMA31)
    for i, want in [
        (0, 1.0),
        (1, 0.8146172338565447),
        (40, 3.428102195952591e-05),
        (45, 1.2297638677963614e-05),
        (63, 3.068925988914511e-07),
    ]:
        assert math.isclose(got[i], want, rel_tol=1e-9), f"第 {i} 项：期望 {want}，得到 {got[i]}"


def test_llama31_is_decreasing():
    got = inv_freq(128, 500000.0, LLAMA31)
    assert all(a > b for a, b in zip(got, got[1:])), "缩放之后逆频率仍应严格递减"


def test_missing_rope_type_means_default():
    assert same(inv_freq(8, 10000.0, {}), inv_freq(8, 10000.0))
    assert same(inv_freq(8, 10000.0, {"factor": 4.0}), inv_freq(8, 10000.0))


def test_linear_large():
    raw = inv_freq(128, 1e6)
    got = inv_freq(128, 1e6, {"rope_type": "linear", "factor": 4.0})
    for i, (g, r) in enumerate(zip(got, raw)):
        assert math.isclose(g, r / 4, rel_tol=1e-12), i


def test_smallest_table():
    assert same(inv_freq(2, 10000.0), [1.0])


def test_bad_arguments():
    _raises(0, 10000.0)
    _raises(7, 10000.0)
    _raises(-2, 10000.0)
    _raises(8, 1.0)
    _raises(8, 0.5)
    _raises(8, 10000.0, {"rope_type": "yarn", "factor": 4.0})
