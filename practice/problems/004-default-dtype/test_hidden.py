"""004 的隐藏测试：异常、嵌套、进入前不是 float32。"""

import torch
from solution import default_dtype


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
    assert torch.get_default_dtype() == torch.float32
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
            assert previous == torch.float16
            assert torch.empty(1).dtype == torch.float64
        assert torch.get_default_dtype() == torch.float16
    assert torch.get_default_dtype() == torch.float32
    _reset()


def test_restores_non_float32_previous():
    _reset()
    torch.set_default_dtype(torch.float64)
    try:
        with default_dtype(torch.bfloat16) as previous:
            assert previous == torch.float64
            assert torch.empty(1).dtype == torch.bfloat16
        assert torch.get_default_dtype() == torch.float64
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
        assert torch.get_default_dtype() == torch.float64
    assert torch.get_default_dtype() == torch.float32
    _reset()
