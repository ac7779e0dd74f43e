"""016 的可见测试。"""

import solution
import torch
from solution import Layer, decoder_forward


def _rmsnorm(x, weight, eps):
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _reference(h, layers, final_norm, eps):
    """transformers 的写法：每块之后立刻加残差。"""
    for layer in layers:
        h = h + layer.attn(_rmsnorm(h, layer.input_norm, eps))
        h = h + layer.mlp(_rmsnorm(h, layer.post_norm, eps))
    return _rmsnorm(h, final_norm, eps)


def _layers(n, hidden=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        a = torch.randn(hidden, hidden, generator=g) / hidden**0.5
        b = torch.randn(hidden, 2 * hidden, generator=g) / hidden**0.5
        c = torch.randn(2 * hidden, hidden, generator=g) / hidden**0.5
        out.append(
            Layer(
                input_norm=1 + 0.2 * torch.randn(hidden, generator=g),
                attn=lambda x, a=a: torch.tanh(x @ a),
                post_norm=1 + 0.2 * torch.randn(hidden, generator=g),
                mlp=lambda x, b=b, c=c: torch.relu(x @ b) @ c,
            )
        )
    return out


def _close(got, want):
    diff = (got - want).abs().max().item()
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5), f"最大误差 {diff}"


def test_example():
    h = torch.tensor([[1.0, 2.0]])
    layer = Layer(torch.ones(2), lambda x: x * 0, torch.ones(2), lambda x: x * 0)
    got = decoder_forward(h, [layer], torch.ones(2), 0.0)
    _close(got, torch.tensor([[1.0, 2.0]]) / 2.5**0.5)


def test_two_layers_match_the_reference():
    torch.manual_seed(1)
    h = torch.randn(5, 8)
    layers = _layers(2)
    final = 1 + 0.2 * torch.randn(8)
    _close(decoder_forward(h, layers, final, 1e-6), _reference(h, layers, final, 1e-6))


def test_input_is_not_modified():
    torch.manual_seed(2)
    h = torch.randn(3, 8)
    before = h.clone()
    decoder_forward(h, _layers(2), torch.ones(8), 1e-6)
    assert torch.equal(h, before), "调用方的 h 被改写了"


def test_norm_call_counts():
    calls = {"rmsnorm": 0, "fused": 0}
    rms, fused = solution.rmsnorm, solution.fused_add_rmsnorm

    def counting_rms(*args):
        calls["rmsnorm"] += 1
        return rms(*args)

    def counting_fused(*args):
        calls["fused"] += 1
        return fused(*args)

    solution.rmsnorm, solution.fused_add_rmsnorm = counting_rms, counting_fused
    try:
        decoder_forward(torch.randn(4, 8), _layers(3), torch.ones(8), 1e-6)
    finally:
        solution.rmsnorm, solution.fused_add_rmsnorm = rms, fused
    assert calls == {"rmsnorm": 1, "fused": 6}, calls
