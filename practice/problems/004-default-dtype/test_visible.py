"""004 的可见测试。"""

import torch
from solution import default_dtype


def _reset():
    # 每个测试先把全局默认值放回 float32，一个测试失败不会连累后面的测试
    torch.set_default_dtype(torch.float32)


def test_inside_and_after():
    _reset()
    with default_dtype(torch.float16):
        assert torch.get_default_dtype() == torch.float16
        assert torch.empty(2).dtype == torch.float16
    assert torch.get_default_dtype() == torch.float32
    assert torch.tensor(1.0).dtype == torch.float32


def test_as_gives_previous_dtype():
    _reset()
    with default_dtype(torch.float64) as previous:
        assert previous == torch.float32
    _reset()
