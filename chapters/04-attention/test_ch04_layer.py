"""第 4 章：AttentionLayer——和 transformers 的 Qwen3Attention 对照（q/k 归一化 + RoPE + GQA，
分 prefill、extend、decode 三步喂进去），张量并行时只算本 rank 的头，没有自己的权重。"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import torch
from transformers import AutoConfig
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3RotaryEmbedding

from minisgl.attention import NativeAttnBackend, page_slots, prepare_batch
from minisgl.core import Batch, Context, Req, reset_global_ctx, set_global_ctx
from minisgl.distributed import get_tp_info, reset_tp_info, set_tp_info
from minisgl.kvcache import MHAKVCache
from minisgl.layers import AttentionLayer, RMSNorm
from minisgl.models.config import ModelConfig

N = 9  # 序列长度：prefill 5 个、extend 3 个、decode 1 个
STEPS = [("prefill", 0, 5), ("prefill", 5, 8), ("decode", 8, 9)]


@pytest.fixture(autouse=True)
def clean_state() -> Iterator[None]:
    reset_global_ctx()
    reset_tp_info()
    yield
    reset_global_ctx()
    reset_tp_info()


@pytest.fixture(scope="module")
def hf_attention(tiny_model: Path) -> tuple[Qwen3Attention, torch.Tensor, torch.Tensor]:
    """随机初始化的 Qwen3Attention（q_norm/k_norm 的权重也随机，不是全 1）、随机输入和它的输出。"""
    hf_config = AutoConfig.from_pretrained(tiny_model)
    hf_config._attn_implementation = "eager"
    torch.manual_seed(0)
    attn = Qwen3Attention(hf_config, layer_idx=0).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
        attn.q_norm.weight.add_(1.0)
        attn.k_norm.weight.add_(1.0)
    hidden = torch.randn(1, N, hf_config.hidden_size)
    pos = torch.arange(N)[None]
    cos_sin = Qwen3RotaryEmbedding(hf_config)(hidden, pos)
    # 加性的因果掩码 (1, 1, N, N)：上三角是 -inf
    mask = torch.full((N, N), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        want, _ = attn(hidden, cos_sin, mask)
    return attn, hidden[0], want[0]


def run_ours(
    attn: Qwen3Attention, hidden: torch.Tensor, config: ModelConfig, page_size: int
) -> torch.Tensor:
    """用 attn 的权重里**本 rank** 的那几个头拼出 qkv 投影，分三步（prefill 5 个、extend 3 个、
    decode 1 个）送进 AttentionLayer。返回注意力的输出（o_proj 之前），
    形状 ``(N, 本 rank 的 Q 头数 * D)``。"""
    d, hidden_size = config.head_dim, config.hidden_size
    q_norm = RMSNorm(d, config.rms_norm_eps)
    q_norm.load_state_dict({"weight": attn.q_norm.weight.detach().clone()})
    k_norm = RMSNorm(d, config.rms_norm_eps)
    k_norm.load_state_dict({"weight": attn.k_norm.weight.detach().clone()})
    layer = AttentionLayer(
        0, config.num_qo_heads, config.num_kv_heads, d, config.rotary_config, q_norm, k_norm
    )
    # 本 rank 的 Q 头是连续的一段；它们所在的 KV 组就是本 rank 的 KV 头
    rank, group = get_tp_info().rank, config.num_qo_heads // config.num_kv_heads
    q_heads = torch.arange(layer.num_qo_heads) + rank * layer.num_qo_heads
    kv_heads = torch.unique(q_heads // group)

    def rows(w: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
        return w.detach().view(-1, d, hidden_size)[heads].reshape(-1, hidden_size)

    w_qkv = torch.cat(
        [
            rows(attn.q_proj.weight, q_heads),
            rows(attn.k_proj.weight, kv_heads),
            rows(attn.v_proj.weight, kv_heads),
        ]
    )
    pool = MHAKVCache(config.num_kv_heads, 1, d, 16 // page_size, page_size, torch.float32, "cpu")
    table = torch.zeros(2, 16, dtype=torch.int32)
    pages = torch.randperm(pool.num_pages, generator=torch.Generator().manual_seed(3))
    table[1, :N] = page_slots(pages[: -(-N // page_size)], page_size, N)
    ctx = Context(page_table=table, kv_cache=pool, attn_backend=NativeAttnBackend(pool, table))
    set_global_ctx(ctx)
    outs = []
    for phase, lo, hi in STEPS:
        req = Req(torch.arange(hi, dtype=torch.int32), table_idx=1, cached_len=lo)
        batch = prepare_batch(Batch([req], phase), table)  # type: ignore[arg-type]
        ctx.attn_backend.prepare_metadata(batch)
        with ctx.forward_batch(batch):
            outs.append(layer.forward(hidden[lo:hi] @ w_qkv.T))
    reset_global_ctx()
    return torch.cat(outs)


@pytest.mark.parametrize("page_size", [1, 4])
def test_matches_transformers_qwen3_attention(
    hf_attention: tuple[Qwen3Attention, torch.Tensor, torch.Tensor],
    tiny_model: Path,
    page_size: int,
) -> None:
    attn, hidden, want = hf_attention
    config = ModelConfig.from_pretrained(tiny_model)
    with torch.no_grad():
        got = run_ours(attn, hidden, config, page_size) @ attn.o_proj.weight.T
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_tensor_parallel_ranks_add_up(
    hf_attention: tuple[Qwen3Attention, torch.Tensor, torch.Tensor], tiny_model: Path
) -> None:
    # tp=2：每个 rank 2 个 Q 头、1 个 KV 头，KV 池也只存这 1 个头。各 rank 的输出乘上 o_proj 里
    # 对应的那几列再相加（第 6 章的 all_reduce），就是完整的结果
    attn, hidden, want = hf_attention
    config = ModelConfig.from_pretrained(tiny_model)
    total = torch.zeros_like(want)
    for rank in range(2):
        reset_tp_info()
        set_tp_info(rank, 2)
        assert MHAKVCache(2, 1, 8, 1, 1, torch.float32, "cpu").k_cache(0).shape[2] == 1
        with torch.no_grad():
            part = run_ours(attn, hidden, config, page_size=4)
        width = part.shape[1]
        assert width == config.num_qo_heads // 2 * config.head_dim
        total += part @ attn.o_proj.weight[:, rank * width : (rank + 1) * width].detach().T
    torch.testing.assert_close(total, want, rtol=1e-5, atol=1e-5)


def test_layer_modifies_qkv_in_place_and_has_no_weights(tiny_model: Path) -> None:
    config = ModelConfig.from_pretrained(tiny_model)
    d = config.head_dim
    q_norm = RMSNorm(d, config.rms_norm_eps)
    q_norm.load_state_dict({"weight": torch.ones(d)})
    layer = AttentionLayer(0, 4, 2, d, config.rotary_config, q_norm=q_norm)
    assert layer.state_dict() == {}  # q_norm 的权重归外层的注意力块，不在这里重复出现
    pool = MHAKVCache(2, 1, d, 4, 4, torch.float32, "cpu")
    table = torch.arange(16, dtype=torch.int32).reshape(1, 16)
    ctx = Context(page_table=table, kv_cache=pool, attn_backend=NativeAttnBackend(pool, table))
    set_global_ctx(ctx)
    qkv = torch.randn(3, 8 * d)
    before = qkv.clone()
    with pytest.raises(RuntimeError, match="no active batch"):
        layer.forward(qkv)
    batch = prepare_batch(Batch([Req(torch.arange(3), table_idx=0)], "prefill"), table)
    ctx.attn_backend.prepare_metadata(batch)
    with ctx.forward_batch(batch):
        out = layer.forward(qkv)
    assert out.shape == (3, 4 * d)
    assert not torch.equal(qkv[:, : 4 * d], before[:, : 4 * d])  # q 被归一化、旋转过
    assert torch.equal(qkv[:, 6 * d :], before[:, 6 * d :])  # v 原样
    # 位置 0 的 k 转过的角度是 0：k 没有归一化，原样
    assert torch.equal(qkv[0, 4 * d : 6 * d], before[0, 4 * d : 6 * d])
    # 写进池子的 k、v 就是改写之后的 qkv 里的值
    torch.testing.assert_close(
        pool.k_cache(0).reshape(-1, 2, d)[:3], qkv[:, 4 * d : 6 * d].view(3, 2, d)
    )


def test_rejects_uneven_heads(tiny_model: Path) -> None:
    config = ModelConfig.from_pretrained(tiny_model)
    with pytest.raises(ValueError, match="kv heads"):
        AttentionLayer(0, 6, 4, config.head_dim, config.rotary_config)
