"""第 6 章：MoE 的路由与专家计算——和逐 token 手算的参照、和 transformers 的
``Qwen3MoeSparseMoeBlock``（重新归一化开、关两种）对照；张量并行时各 rank 的部分和加起来
等于完整结果。"""

from __future__ import annotations

from typing import Iterator

import pytest
import torch
import torch.nn.functional as F

from minisgl.distributed import reset_tp_info, set_tp_info
from minisgl.layers import LinearReplicated
from minisgl.moe import SUPPORTED_MOE_BACKENDS, MoELayer, create_moe_backend
from minisgl.moe.native import NativeMoeBackend, group_by_expert, moe_forward, select_experts

E, K, H, INTER = 6, 2, 16, 12


@pytest.fixture(autouse=True)
def clean_tp() -> Iterator[None]:
    reset_tp_info()
    yield
    reset_tp_info()


def random_experts(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    gate_up = torch.randn(E, 2 * INTER, H, generator=g) / H**0.5
    down = torch.randn(E, H, INTER, generator=g) / INTER**0.5
    return gate_up, down


def reference(
    x: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    logits: torch.Tensor,
    top_k: int,
    renormalize: bool,
) -> torch.Tensor:
    """最笨的写法：对每个 token，按概率从大到小取 top_k 个专家，逐个算 MLP 再加权（float64）。"""
    out = torch.zeros(x.shape[0], down.shape[1], dtype=torch.float64)
    for t in range(x.shape[0]):
        probs = torch.softmax(logits[t].double(), dim=-1)
        chosen = sorted(range(len(probs)), key=lambda e: -probs[e].item())[:top_k]
        total = sum(probs[e].item() for e in chosen) if renormalize else 1.0
        for e in chosen:
            gate, up = (gate_up[e].double() @ x[t].double()).chunk(2)
            out[t] += probs[e].item() / total * (down[e].double() @ (F.silu(gate) * up))
    return out


def test_select_experts_sorted_and_renormalized() -> None:
    logits = torch.tensor([[0.0, 2.0, 1.0, -1.0], [3.0, 0.0, 0.0, 3.5]])
    weights, ids = select_experts(logits, 2, renormalize=False)
    assert ids.tolist() == [[1, 2], [3, 0]]
    probs = torch.softmax(logits, dim=-1)
    torch.testing.assert_close(weights, probs.gather(1, ids))  # 就是 softmax 概率，从大到小
    assert (weights.sum(-1) < 1).all()  # 不重新归一化：k 个权重之和小于 1
    renormed, same_ids = select_experts(logits, 2, renormalize=True)
    assert torch.equal(same_ids, ids)  # 重新归一化不改变选谁
    torch.testing.assert_close(renormed.sum(-1), torch.ones(2))
    torch.testing.assert_close(renormed, weights / weights.sum(-1, keepdim=True))
    # bf16 的打分也在 float32 里算概率
    assert select_experts(logits.bfloat16(), 2, True)[0].dtype == torch.float32


def test_group_by_expert_docstring_example() -> None:
    order, counts = group_by_expert(torch.tensor([[2, 0], [0, 1], [2, 1]]), 4)
    assert order.tolist() == [1, 2, 3, 5, 0, 4]
    assert counts.tolist() == [2, 2, 2, 0]
    # 每组里 token 保持原来的先后顺序：专家 0 的是 token 0、1，专家 2 的是 token 0、2
    assert (order // 2).tolist() == [0, 1, 1, 2, 0, 2]


@pytest.mark.parametrize("renormalize", [True, False])
def test_native_backend_matches_per_token_reference(renormalize: bool) -> None:
    gate_up, down = random_experts()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(9, H, generator=g)
    logits = torch.randn(9, E, generator=g) * 2
    got = NativeMoeBackend().forward(x, gate_up, down, logits, K, renormalize, "silu")
    assert got.shape == (9, H) and got.dtype == torch.float32
    want = reference(x, gate_up, down, logits, K, renormalize)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


def test_experts_without_tokens_are_skipped() -> None:
    """decode 时只有几个 token，很多专家一个 token 也分不到：它们不参与计算，结果照样对。"""
    gate_up, down = random_experts(2)
    x = torch.randn(3, H, generator=torch.Generator().manual_seed(3))
    logits = torch.full((3, E), -10.0)
    logits[:, 4] = 5.0  # 三个 token 都选专家 4 和 1，其余 4 个专家没有 token
    logits[:, 1] = 4.0
    weights, ids = select_experts(logits, K, renormalize=True)
    assert torch.bincount(ids.flatten(), minlength=E).tolist() == [0, 3, 0, 0, 3, 0]
    got = moe_forward(x, gate_up, down, weights, ids)
    torch.testing.assert_close(
        got.double(), reference(x, gate_up, down, logits, K, True), atol=1e-5, rtol=1e-5
    )
    # 把没用到的专家的权重换成 NaN：如果它们被算了，NaN 会混进结果
    poisoned_gu, poisoned_down = gate_up.clone(), down.clone()
    for e in (0, 2, 3, 5):
        poisoned_gu[e] = float("nan")
        poisoned_down[e] = float("nan")
    assert torch.equal(moe_forward(x, poisoned_gu, poisoned_down, weights, ids), got)


def test_no_tokens_at_all() -> None:
    gate_up, down = random_experts()
    out = NativeMoeBackend().forward(
        torch.empty(0, H), gate_up, down, torch.empty(0, E), K, True, "silu"
    )
    assert out.shape == (0, H)


def test_bfloat16_keeps_the_dtype() -> None:
    gate_up, down = random_experts()
    x = torch.randn(5, H, generator=torch.Generator().manual_seed(4))
    logits = torch.randn(5, E, generator=torch.Generator().manual_seed(5))
    got = NativeMoeBackend().forward(
        x.bfloat16(), gate_up.bfloat16(), down.bfloat16(), logits.bfloat16(), K, True, "silu"
    )
    assert got.dtype == torch.bfloat16
    want = reference(x, gate_up, down, logits.bfloat16().float(), K, True)
    torch.testing.assert_close(got.double(), want, atol=5e-2, rtol=5e-2)


def test_backend_registry() -> None:
    assert "torch" in SUPPORTED_MOE_BACKENDS
    assert isinstance(create_moe_backend("auto"), NativeMoeBackend)
    assert isinstance(create_moe_backend("torch"), NativeMoeBackend)
    with pytest.raises(ValueError, match="supported: torch"):
        create_moe_backend("fused")


def test_moe_layer_state_dict_and_shapes() -> None:
    layer = MoELayer(E, K, H, INTER, renormalize=True)
    assert {k: tuple(v.shape) for k, v in layer.state_dict().items()} == {
        "gate_up_proj": (E, 2 * INTER, H),
        "down_proj": (E, H, INTER),
    }
    set_tp_info(1, 4)
    sharded = MoELayer(E, K, H, INTER, renormalize=True)
    assert sharded.gate_up_proj.shape == (E, 2 * INTER // 4, H)
    assert sharded.down_proj.shape == (E, H, INTER // 4)
    with pytest.raises(ValueError, match="top_k"):
        MoELayer(E, E + 1, H, INTER, renormalize=True)


@pytest.mark.parametrize("tp", [2, 3])
def test_partial_sums_over_ranks_equal_the_full_result(tp: int) -> None:
    """每个 rank 只有每个专家中间维度的一段（gate、up 按行切，down 按列切）；
    路由在每个 rank 上都一样，各 rank 的部分和相加（all_reduce 做的事）就是完整结果。"""
    gate_up, down = random_experts(6)
    x = torch.randn(7, H, generator=torch.Generator().manual_seed(7))
    logits = torch.randn(7, E, generator=torch.Generator().manual_seed(8))
    full = MoELayer(E, K, H, INTER, renormalize=True)
    full.load_state_dict({"gate_up_proj": gate_up, "down_proj": down})
    want = full.forward(x, logits)  # tp=1：all_reduce 是恒等函数
    n = INTER // tp
    total = torch.zeros_like(want)
    for rank in range(tp):
        reset_tp_info()
        set_tp_info(rank, tp)
        rows = slice(rank * n, (rank + 1) * n)
        local = MoELayer(E, K, H, INTER, renormalize=True)
        local.load_state_dict(
            {
                # 先切再拼：gate 的第 rank 段接 up 的第 rank 段
                "gate_up_proj": torch.cat(
                    [gate_up[:, :INTER][:, rows], gate_up[:, INTER:][:, rows]], 1
                ),
                "down_proj": down[:, :, rows].contiguous(),
            }
        )
        total += local.forward_local(x, logits)
    torch.testing.assert_close(total, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("renormalize", [True, False])
def test_matches_transformers_sparse_moe_block(renormalize: bool) -> None:
    """路由器（复制的线性层）+ MoELayer，和 transformers 的 Qwen3MoeSparseMoeBlock 用同一组权重。"""
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    hf_config = Qwen3MoeConfig(
        hidden_size=H,
        moe_intermediate_size=INTER,
        num_experts=E,
        num_experts_per_tok=K,
        norm_topk_prob=renormalize,
        hidden_act="silu",
    )
    torch.manual_seed(0)
    block = Qwen3MoeSparseMoeBlock(hf_config).eval()
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    x = torch.randn(2, 11, H)
    with torch.no_grad():
        want = block(x).reshape(-1, H)
    hf = {k: v.detach() for k, v in block.state_dict().items()}
    assert set(hf) == {"gate.weight", "experts.gate_up_proj", "experts.down_proj"}

    router = LinearReplicated(H, E)
    router.load_state_dict({"weight": hf["gate.weight"]})
    experts = MoELayer(E, K, H, INTER, renormalize=renormalize)
    experts.load_state_dict(
        {"gate_up_proj": hf["experts.gate_up_proj"], "down_proj": hf["experts.down_proj"]}
    )
    flat = x.reshape(-1, H)
    got = experts.forward(flat, router.forward(flat))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
