"""010 的可见测试。"""

import torch
from solution import fused_add_rmsnorm


def _close(got, want):
    # 不用 torch.testing.assert_close：它会顺带导入 torch.distributed，评测多花一秒
    diff = (got - want).abs().max().item()
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), f"最大误差 {diff}"


def _reference(x, residual, weight, eps):
    s = (x + residual).float()
    normed = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps)
    return x + residual, weight * normed.to(x.dtype)


def test_example():
    x = torch.tensor([[3.0, 4.0]])
    residual = torch.tensor([[1.0, 0.0]])
    assert fused_add_rmsnorm(x, residual, torch.ones(2), 0.0) is None
    assert residual.tolist() == [[4.0, 4.0]]
    assert x.tolist() == [[1.0, 1.0]]


def test_random_float32():
    torch.manual_seed(0)
    x, residual, weight = torch.randn(5, 16), torch.randn(5, 16), torch.randn(16)
    want_residual, want_x = _reference(x, residual, weight, 1e-6)
    fused_add_rmsnorm(x, residual, weight, 1e-6)
    _close(residual, want_residual)
    _close(x, want_x)


def test_caller_sees_the_change():
    torch.manual_seed(0)
    x, residual = torch.randn(3, 8), torch.randn(3, 8)
    x_ptr, r_ptr = x.data_ptr(), residual.data_ptr()
    x0, r0 = x.clone(), residual.clone()
    fused_add_rmsnorm(x, residual, torch.ones(8), 1e-6)
    assert x.data_ptr() == x_ptr and residual.data_ptr() == r_ptr
    assert not torch.equal(x, x0), "x 应当被原地改写"
    assert not torch.equal(residual, r0), "residual 应当被原地改写"
