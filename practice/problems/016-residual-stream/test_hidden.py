"""016 的隐藏测试：没有层、一层、很多层、bf16 下逐位相同、块直接返回输入、单个 token。"""

import solution
import torch
from solution import Layer, decoder_forward


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


def _rmsnorm(x, weight, eps):
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _reference(h, layers, final_norm, eps):
    for layer in layers:
        h = h + layer.attn(_rmsnorm(h, layer.input_norm, eps))
        h = h + layer.mlp(_rmsnorm(h, layer.post_norm, eps))
    return _rmsnorm(h, final_norm, eps)


def _layers(n, hidden=16, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        a = (torch.randn(hidden, hidden, generator=g) / hidden**0.5).to(dtype)
        b = (torch.randn(hidden, 2 * hidden, generator=g) / hidden**0.5).to(dtype)
        c = (torch.randn(2 * hidden, hidden, generator=g) / hidden**0.5).to(dtype)
        out.append(
            Layer(
                input_norm=(1 + 0.2 * torch.randn(hidden, generator=g)).to(dtype),
                attn=lambda x, a=a: torch.tanh(x @ a),
                post_norm=(1 + 0.2 * torch.randn(hidden, generator=g)).to(dtype),
                mlp=lambda x, b=b, c=c: torch.relu(x @ b) @ c,
            )
        )
    return out


def _close(got, want, tol=1e-5):
    assert type(got) is torch.Tensor, f"应返回 torch.Tensor，得到 {type(got).__name__}"
    assert got.dtype == want.dtype, f"dtype 应为 {want.dtype}，得到 {got.dtype}"
    assert got.shape == want.shape, f"形状应为 {tuple(want.shape)}，得到 {tuple(got.shape)}"
    diff = (got - want).abs().max().item()
    assert torch.allclose(got, want, rtol=tol, atol=tol), f"最大误差 {diff}"


def _count(fn):
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
        result = fn()
    finally:
        solution.rmsnorm, solution.fused_add_rmsnorm = rms, fused
    return result, calls


def test_no_layers():
    torch.manual_seed(0)
    h, final = torch.randn(3, 16), 1 + 0.2 * torch.randn(16)
    got, calls = _count(lambda: decoder_forward(h, [], final, 1e-6))
    _close(got, _rmsnorm(h, final, 1e-6))
    assert same(calls, {"rmsnorm": 1, "fused": 0}), calls


def test_one_layer():
    torch.manual_seed(1)
    h, final = torch.randn(4, 16), 1 + 0.2 * torch.randn(16)
    layers = _layers(1, seed=1)
    got, calls = _count(lambda: decoder_forward(h, layers, final, 1e-6))
    _close(got, _reference(h, layers, final, 1e-6))
    assert same(calls, {"rmsnorm": 1, "fused": 2}), calls


def test_many_layers():
    torch.manual_seed(2)
    h, final = torch.randn(7, 16), 1 + 0.2 * torch.randn(16)
    layers = _layers(6, seed=2)
    before = h.clone()
    got, calls = _count(lambda: decoder_forward(h, layers, final, 1e-5))
    _close(got, _reference(h, layers, final, 1e-5), tol=1e-4)
    assert same(calls, {"rmsnorm": 1, "fused": 12}), calls
    assert torch.equal(h, before), "调用方的 h 被改写了"


def test_bfloat16_is_bitwise_equal():
    # 加法都在 bf16 里做、顺序相同：推迟残差不改变任何一位
    torch.manual_seed(3)
    h = torch.randn(5, 16).to(torch.bfloat16)
    final = (1 + 0.2 * torch.randn(16)).to(torch.bfloat16)
    layers = _layers(3, seed=3, dtype=torch.bfloat16)
    got = decoder_forward(h, layers, final, 1e-6)
    assert same(got.dtype, torch.bfloat16)
    assert torch.equal(got, _reference(h, layers, final, 1e-6))


def test_blocks_that_return_their_input():
    # attn、mlp 原样返回输入（恒等）：残差流每块翻一倍
    torch.manual_seed(4)
    h = torch.randn(2, 16)
    layer = Layer(torch.ones(16), lambda x: x, torch.ones(16), lambda x: x)
    before = h.clone()
    got = decoder_forward(h, [layer, layer], torch.ones(16), 1e-6)
    _close(got, _reference(before, [layer, layer], torch.ones(16), 1e-6))
    assert torch.equal(h, before)


def test_single_token():
    torch.manual_seed(5)
    h = torch.randn(1, 16)
    layers = _layers(2, seed=5)
    final = torch.ones(16)
    _close(decoder_forward(h, layers, final, 1e-6), _reference(h, layers, final, 1e-6))
