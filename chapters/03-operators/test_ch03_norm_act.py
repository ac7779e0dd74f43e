"""第 3 章：RMSNorm 与 transformers 的 Qwen3RMSNorm 对照；加残差再归一化的原地约定；门控激活。"""

from __future__ import annotations

import pytest
import torch
from transformers.activations import ACT2FN
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

from minisgl.layers import RMSNorm, RMSNormFused, get_act_and_mul
from minisgl.utils import torch_dtype

HIDDEN = 64


def make_norms(dtype: torch.dtype, eps: float = 1e-6) -> tuple[RMSNorm, Qwen3RMSNorm]:
    weight = (1 + 0.1 * torch.randn(HIDDEN)).to(dtype)
    with torch_dtype(dtype):  # 层按默认 dtype 占位；加载 dtype 不同的权重会被拒绝
        ours = RMSNorm(HIDDEN, eps)
    ours.load_state_dict({"weight": weight})
    ref = Qwen3RMSNorm(HIDDEN, eps=eps).to(dtype)
    ref.weight.data.copy_(weight)
    return ours, ref


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_matches_transformers(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    ours, ref = make_norms(dtype)
    x = (3 * torch.randn(7, HIDDEN)).to(dtype)
    with torch.no_grad():
        want = ref(x)
    got = ours(x)
    assert got.dtype == dtype
    # 运算顺序和 transformers 一样（float32 里求方差，转回原 dtype 再乘 weight），逐位相等
    assert torch.equal(got, want)


def test_rmsnorm_forward_inplace_on_a_view() -> None:
    """第 4 章对 qkv 大矩阵里 q 那几列做 q_norm：原地写回，别的列不动。"""
    torch.manual_seed(0)
    ours, _ = make_norms(torch.float32)
    qkv = torch.randn(5, 3 * HIDDEN)
    original = qkv.clone()
    q = qkv[:, :HIDDEN]
    ours.forward_inplace(q)
    torch.testing.assert_close(qkv[:, :HIDDEN], ours(original[:, :HIDDEN]))
    assert torch.equal(qkv[:, HIDDEN:], original[:, HIDDEN:])


def test_fused_without_residual_starts_the_stream() -> None:
    torch.manual_seed(0)
    fused = RMSNormFused(HIDDEN, 1e-6)
    fused.load_state_dict({"weight": torch.randn(HIDDEN)})
    x = torch.randn(4, HIDDEN)
    before = x.clone()
    normed, residual = fused(x, None)
    assert residual is x and torch.equal(x, before)  # x 没被改，它就是残差流的起点
    assert normed is not x
    torch.testing.assert_close(normed, plain_norm(fused, before))


def plain_norm(fused: RMSNormFused, x: torch.Tensor) -> torch.Tensor:
    plain = RMSNorm(HIDDEN, fused.eps)
    plain.load_state_dict({"weight": fused.weight})
    return plain(x)


def test_fused_add_rmsnorm_writes_both_inputs_in_place() -> None:
    torch.manual_seed(0)
    fused = RMSNormFused(HIDDEN, 1e-6)
    fused.load_state_dict({"weight": torch.randn(HIDDEN)})
    x, residual = torch.randn(4, HIDDEN), torch.randn(4, HIDDEN)
    x0, r0 = x.clone(), residual.clone()
    out, new_residual = fused(x, residual)
    # 返回的就是传进去的两个对象：residual ← x + residual，x ← norm(x + residual)
    assert out is x and new_residual is residual
    assert torch.equal(residual, x0 + r0)
    assert torch.equal(x, plain_norm(fused, x0 + r0))


def test_fused_chain_equals_the_transformers_decoder_pattern() -> None:
    """transformers 写 residual = h; h = norm(h); h = f(h); h = residual + h。
    我们把加残差推迟到下一个 norm 里。两种写法算的是同一个东西。"""
    torch.manual_seed(0)
    norms = [RMSNormFused(HIDDEN, 1e-6) for _ in range(3)]
    refs = []
    for n in norms:
        w = 1 + 0.1 * torch.randn(HIDDEN)
        n.load_state_dict({"weight": w})
        ref = Qwen3RMSNorm(HIDDEN, eps=1e-6)
        ref.weight.data.copy_(w)
        refs.append(ref)
    blocks = [torch.randn(HIDDEN, HIDDEN) / 8 for _ in range(2)]
    h0 = torch.randn(6, HIDDEN)

    with torch.no_grad():  # transformers 的写法
        h = h0.clone()
        for ref, w in zip(refs[:2], blocks):
            residual = h
            h = ref(h) @ w
            h = residual + h
        want = refs[2](h)

    h, residual = h0.clone(), None  # 我们的写法：加残差推迟到下一个 norm 里
    for norm, w in zip(norms[:2], blocks):
        h, residual = norm(h, residual)
        h = h @ w
    got, _ = norms[2](h, residual)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["silu", "gelu", "gelu_pytorch_tanh"])
def test_act_and_mul_matches_transformers(name: str) -> None:
    torch.manual_seed(0)
    gate, up = torch.randn(5, 32), torch.randn(5, 32)
    got = get_act_and_mul(name)(torch.cat([gate, up], dim=-1))
    want = ACT2FN[name](gate) * up
    assert got.shape == (5, 32)
    # 不要求逐位相等：gate 在我们这里是大张量的一个视图，向量化的路径不同，最后一位可能不同
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_unknown_activation_lists_the_supported_ones() -> None:
    with pytest.raises(ValueError, match="supported: gelu, gelu_pytorch_tanh, silu"):
        get_act_and_mul("relu2")
