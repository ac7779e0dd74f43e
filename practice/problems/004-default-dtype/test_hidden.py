"""004 的隐藏测试：异常、嵌套、进入前不是 float32。"""

import torch
from solution import default_dtype


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


def _reset():
    torch.set_default_dtype(torch.float32)


class _Boom(Exception):
    pass


def test_restores_after_exception():
    _reset()
    try:
        with default_dtype(torch.float16):
            raise _Boom()
    except _Boom:
        pass
    assert same(torch.get_default_dtype(), torch.float32)
    _reset()


def test_exception_propagates():
    _reset()
    raised = False
    try:
        with default_dtype(torch.float16):
            raise _Boom()
    except _Boom:
        raised = True
    assert raised, "with 块里的异常被吞掉了"
    _reset()


def test_nested():
    _reset()
    with default_dtype(torch.float16):
        with default_dtype(torch.float64) as previous:
            assert same(previous, torch.float16)
            assert same(torch.empty(1).dtype, torch.float64)
        assert same(torch.get_default_dtype(), torch.float16)
    assert same(torch.get_default_dtype(), torch.float32)
    _reset()


def test_restores_non_float32_previous():
    _reset()
    torch.set_default_dtype(torch.float64)
    try:
        with default_dtype(torch.bfloat16) as previous:
            assert same(previous, torch.float64)
            assert same(torch.empty(1).dtype, torch.bfloat16)
        assert same(torch.get_default_dtype(), torch.float64)
    finally:
        _reset()


def test_nested_exception_restores_each_level():
    _reset()
    with default_dtype(torch.float64):
        try:
            with default_dtype(torch.float16):
                raise _Boom()
        except _Boom:
            pass
        assert same(torch.get_default_dtype(), torch.float64)
    assert same(torch.get_default_dtype(), torch.float32)
    _reset()
