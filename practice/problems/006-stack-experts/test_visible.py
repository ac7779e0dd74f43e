"""006 的可见测试。"""

import torch
from solution import stack_experts


def _weights(num_experts, inter, hidden, prefix="mlp", seed=0):
    g = torch.Generator().manual_seed(seed)
    w = {}
    for e in range(num_experts):
        w[f"{prefix}.experts.{e}.gate_proj.weight"] = torch.randn(inter, hidden, generator=g)
        w[f"{prefix}.experts.{e}.up_proj.weight"] = torch.randn(inter, hidden, generator=g)
        w[f"{prefix}.experts.{e}.down_proj.weight"] = torch.randn(hidden, inter, generator=g)
    return w


def test_shapes():
    gate_up, down = stack_experts(_weights(2, 4, 3), "mlp", 2, 2, 0)
    assert gate_up.shape == (2, 4, 3)
    assert down.shape == (2, 3, 2)


def test_tp1_is_cat_and_stack():
    w = _weights(3, 4, 5)
    gate_up, down = stack_experts(w, "mlp", 3, 1, 0)
    for e in range(3):
        p = f"mlp.experts.{e}."
        assert torch.equal(
            gate_up[e], torch.cat([w[p + "gate_proj.weight"], w[p + "up_proj.weight"]])
        )
        assert torch.equal(down[e], w[p + "down_proj.weight"])


def test_rank1_rows():
    w = _weights(1, 4, 3)
    gate_up, down = stack_experts(w, "mlp", 1, 2, 1)
    assert torch.equal(gate_up[0, :2], w["mlp.experts.0.gate_proj.weight"][2:])
    assert torch.equal(gate_up[0, 2:], w["mlp.experts.0.up_proj.weight"][2:])
    assert torch.equal(down[0], w["mlp.experts.0.down_proj.weight"][:, 2:])
