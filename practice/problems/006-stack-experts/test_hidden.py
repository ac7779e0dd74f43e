"""006 的隐藏测试：各 rank 的输出相加等于完整输出、专家编号顺序、连续、缺权重与非法参数。"""

import torch
from solution import stack_experts


def same_tensor(actual, expected):
    """actual 必须是真正的 torch.Tensor，dtype、形状、数值都和 expected 一样。"""
    assert type(actual) is torch.Tensor, f"应返回 torch.Tensor，得到 {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"dtype 应为 {expected.dtype}，得到 {actual.dtype}"
    assert actual.shape == expected.shape, (
        f"形状应为 {tuple(expected.shape)}，得到 {tuple(actual.shape)}"
    )
    assert torch.equal(actual, expected), "数值不对"


def _weights(num_experts, inter, hidden, prefix="mlp", seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    w = {}
    for e in range(num_experts):
        w[f"{prefix}.experts.{e}.gate_proj.weight"] = torch.randn(inter, hidden, generator=g).to(
            dtype
        )
        w[f"{prefix}.experts.{e}.up_proj.weight"] = torch.randn(inter, hidden, generator=g).to(
            dtype
        )
        w[f"{prefix}.experts.{e}.down_proj.weight"] = torch.randn(hidden, inter, generator=g).to(
            dtype
        )
    return w


def _expert(gate_up, down, x):
    n = gate_up.shape[0] // 2
    return down @ (torch.nn.functional.silu(gate_up[:n] @ x) * (gate_up[n:] @ x))


def _error(*args):
    try:
        stack_experts(*args)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"stack_experts{args[1:]} 应当抛出 ValueError")


def test_sum_over_ranks_equals_full_output():
    num_experts, inter, hidden = 3, 8, 5
    w = _weights(num_experts, inter, hidden, seed=1)
    x = torch.randn(hidden, generator=torch.Generator().manual_seed(2))
    full_gu, full_down = stack_experts(w, "mlp", num_experts, 1, 0)
    for tp in (2, 4, 8):
        parts = [stack_experts(w, "mlp", num_experts, tp, r) for r in range(tp)]
        for e in range(num_experts):
            expected = _expert(full_gu[e], full_down[e], x)
            got = sum(_expert(gu[e], d[e], x) for gu, d in parts)
            assert torch.allclose(got, expected, atol=1e-5), f"tp={tp}, 专家 {e}"


def test_experts_in_numeric_order():
    w = _weights(12, 4, 3, prefix="model.layers.7.mlp", seed=3)
    shuffled = dict(sorted(w.items()))  # 按字符串排序：experts.10、experts.11 排在 experts.2 前面
    gate_up, down = stack_experts(shuffled, "model.layers.7.mlp", 12, 1, 0)
    for e in range(12):
        p = f"model.layers.7.mlp.experts.{e}."
        assert torch.equal(gate_up[e, :4], w[p + "gate_proj.weight"]), f"第 {e} 个位置放错了专家"
        assert torch.equal(down[e], w[p + "down_proj.weight"])


def test_contiguous_dtype_and_extra_keys():
    w = _weights(2, 4, 6, dtype=torch.bfloat16)
    w["mlp.gate.weight"] = torch.zeros(2, 6)  # 路由器：不是专家的权重，忽略
    gate_up, down = stack_experts(w, "mlp", 2, 2, 1)
    assert gate_up.is_contiguous() and down.is_contiguous()
    assert gate_up.dtype == down.dtype == torch.bfloat16


def test_missing_weight():
    w = _weights(3, 4, 3)
    del w["mlp.experts.2.up_proj.weight"]
    assert "mlp.experts.2.up_proj.weight" in _error(w, "mlp", 3, 1, 0)


def test_invalid_arguments():
    w = _weights(2, 6, 3)
    _error(w, "mlp", 2, 4, 0)  # 6 不能被 4 整除
    _error(w, "mlp", 2, 0, 0)
    _error(w, "mlp", 2, 2, 2)
    _error(w, "mlp", 2, 2, -1)


def test_returns_a_tuple_of_exact_tensors():
    # (gate_up, down) 是两个张量组成的 tuple，dtype 与输入相同、取值逐位相同
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        w = _weights(3, 4, 2, seed=5, dtype=dtype)
        result = stack_experts(w, "mlp", 3, 2, 1)
        assert type(result) is tuple and len(result) == 2, f"应返回两个张量的 tuple：{result!r}"
        gate_up, down = result
        want_gu = torch.stack(
            [
                torch.cat(
                    [
                        w[f"mlp.experts.{e}.gate_proj.weight"][2:],
                        w[f"mlp.experts.{e}.up_proj.weight"][2:],
                    ]
                )
                for e in range(3)
            ]
        )
        want_down = torch.stack([w[f"mlp.experts.{e}.down_proj.weight"][:, 2:] for e in range(3)])
        same_tensor(gate_up, want_gu)
        same_tensor(down, want_down)
