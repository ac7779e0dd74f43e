"""010 的隐藏测试：bf16 逐位相等、视图、eps、三维输入。"""

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


def test_bfloat16_bit_exact():
    torch.manual_seed(1)
    x = (20 * torch.randn(64, 256)).to(torch.bfloat16)
    residual = (20 * torch.randn(64, 256)).to(torch.bfloat16)
    weight = (1 + 0.1 * torch.randn(256)).to(torch.bfloat16)
    want_residual, want_x = _reference(x, residual, weight, 1e-6)
    fused_add_rmsnorm(x, residual, weight, 1e-6)
    assert x.dtype == torch.bfloat16 and residual.dtype == torch.bfloat16
    assert torch.equal(residual, want_residual), "residual 应当在 bf16 里相加"
    assert torch.equal(x, want_x), "方差要在 float32 里算，结果转回 bf16 再乘 weight"


def test_views_of_a_bigger_tensor():
    torch.manual_seed(2)
    big = torch.randn(4, 3 * 8)
    original = big.clone()
    x, residual = big[:, :8], big[:, 8:16]
    want_residual, want_x = _reference(x.clone(), residual.clone(), torch.ones(8), 1e-6)
    fused_add_rmsnorm(x, residual, torch.ones(8), 1e-6)
    _close(big[:, :8], want_x)
    _close(big[:, 8:16], want_residual)
    assert torch.equal(big[:, 16:], original[:, 16:]), "视图以外的列不能动"


def test_eps_keeps_zero_rows_finite():
    x, residual = torch.zeros(2, 4), torch.zeros(2, 4)
    fused_add_rmsnorm(x, residual, torch.ones(4), 1e-6)
    assert torch.equal(x, torch.zeros(2, 4))


def test_eps_is_inside_the_sqrt():
    x, residual = torch.full((1, 4), 0.001), torch.zeros(1, 4)
    fused_add_rmsnorm(x, residual, torch.ones(4), 1e-6)
    want = 0.001 / (0.001**2 + 1e-6) ** 0.5
    _close(x, torch.full((1, 4), want))


def test_three_dims():
    torch.manual_seed(3)
    x, residual, weight = torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.randn(8)
    want_residual, want_x = _reference(x, residual, weight, 1e-5)
    fused_add_rmsnorm(x, residual, weight, 1e-5)
    _close(residual, want_residual)
    _close(x, want_x)


def test_returns_none_and_keeps_dtypes():
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        x, residual = torch.randn(3, 8).to(dtype), torch.randn(3, 8).to(dtype)
        want_residual, want_x = _reference(x, residual, torch.ones(8, dtype=dtype), 1e-6)
        result = fused_add_rmsnorm(x, residual, torch.ones(8, dtype=dtype), 1e-6)
        assert result is None, f"应返回 None（原地改写），得到 {type(result).__name__}"
        assert x.dtype == dtype and residual.dtype == dtype
        assert torch.equal(residual, want_residual) and torch.equal(x, want_x), dtype
