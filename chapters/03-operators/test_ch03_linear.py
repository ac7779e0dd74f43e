"""第 3 章：线性层。权重形状由配置和 TP 信息决定；在一个进程里模拟 tp=2、tp=4：
把完整权重按列并行/行并行的规则切给各个 rank，各 rank 的输出拼起来（或加起来）等于 tp=1 的结果。"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP

from minisgl.distributed import reset_tp_info, set_tp_info
from minisgl.layers import (
    LinearColParallelMerged,
    LinearQKVMerged,
    LinearReplicated,
    LinearRowParallel,
    silu_and_mul,
)
from minisgl.models.config import ModelConfig


@contextlib.contextmanager
def as_rank(rank: int, size: int) -> Iterator[None]:
    """假装本进程是 size 个 rank 里的第 rank 个：这期间建的层按这个 TP 信息切形状。"""
    reset_tp_info()
    set_tp_info(rank, size)
    try:
        yield
    finally:
        reset_tp_info()


@pytest.fixture
def config(tiny_model: Path) -> ModelConfig:
    return ModelConfig.from_pretrained(tiny_model)


def test_replicated_is_f_linear() -> None:
    torch.manual_seed(0)
    layer = LinearReplicated(8, 3, bias=True)
    w, b = torch.randn(3, 8), torch.randn(3)
    layer.load_state_dict({"weight": w, "bias": b})
    x = torch.randn(5, 8)
    assert torch.equal(layer(x), F.linear(x, w, b))


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_local_shapes_come_from_config_and_tp(config: ModelConfig, tp: int) -> None:
    h, d, inter = config.hidden_size, config.head_dim, config.intermediate_size
    q_heads, kv_heads = config.num_qo_heads, config.num_kv_heads  # 4 个 Q 头、2 个 KV 头
    with as_rank(tp - 1, tp):
        qkv = LinearQKVMerged(h, d, q_heads, kv_heads)
        gate_up = LinearColParallelMerged(h, [inter, inter])
        o_proj = LinearRowParallel(q_heads * d, h)
        down = LinearRowParallel(inter, h)
    local_kv = max(kv_heads // tp, 1)  # tp=4 时 KV 头不够分：每个 rank 放一个副本
    assert qkv.weight.shape == ((q_heads // tp + 2 * local_kv) * d, h)
    assert qkv.local_output_sizes == [q_heads // tp * d, local_kv * d, local_kv * d]
    assert gate_up.weight.shape == (2 * inter // tp, h)
    assert o_proj.weight.shape == (h, q_heads * d // tp)
    assert down.weight.shape == (h, inter // tp)


def test_uneven_split_is_an_error() -> None:
    with as_rank(0, 3), pytest.raises(ValueError, match="not divisible"):
        LinearColParallelMerged(8, [16, 16])


def test_merged_column_parallel_tp2_concat_equals_tp1() -> None:
    """gate_up 的每个 rank 拿"gate 的第 r 段 + up 的第 r 段"，激活在本地算，拼起来就是完整结果。"""
    torch.manual_seed(0)
    hidden, inter, tp = 16, 24, 2
    gate, up = torch.randn(inter, hidden), torch.randn(inter, hidden)
    x = torch.randn(5, hidden)
    full = LinearColParallelMerged(hidden, [inter, inter])
    full.load_state_dict({"weight": torch.cat([gate, up])})
    want = silu_and_mul(full(x))
    outs = []
    for r in range(tp):
        with as_rank(r, tp):
            layer = LinearColParallelMerged(hidden, [inter, inter])
        shard = torch.cat([gate.chunk(tp)[r], up.chunk(tp)[r]])
        layer.load_state_dict({"weight": shard})
        outs.append(silu_and_mul(layer(x)))
    torch.testing.assert_close(torch.cat(outs, dim=-1), want)

    # 反例：把 [gate; up] 整体按行切两半，rank 0 拿到的全是 gate，本地没法算激活
    wrong = torch.cat([gate, up]).chunk(tp)[0]
    assert not torch.allclose(silu_and_mul(F.linear(x, wrong)), outs[0])


def test_qkv_tp4_replicates_kv_heads(config: ModelConfig) -> None:
    """4 个 Q 头、2 个 KV 头、tp=4：rank r 拿 Q 头 r 和 KV 头 r * 2 // 4。"""
    torch.manual_seed(0)
    h, d = config.hidden_size, config.head_dim
    q_heads, kv_heads, tp = config.num_qo_heads, config.num_kv_heads, 4
    wq = torch.randn(q_heads * d, h)
    wk, wv = torch.randn(kv_heads * d, h), torch.randn(kv_heads * d, h)
    x = torch.randn(3, h)
    q_full, k_full, v_full = F.linear(x, wq), F.linear(x, wk), F.linear(x, wv)
    q_parts = []
    for r in range(tp):
        with as_rank(r, tp):
            layer = LinearQKVMerged(h, d, q_heads, kv_heads)
        kv = r * kv_heads // tp
        rows = slice(kv * d, (kv + 1) * d)
        layer.load_state_dict({"weight": torch.cat([wq.chunk(tp)[r], wk[rows], wv[rows]])})
        q, k, v = layer(x).split(layer.local_output_sizes, dim=-1)
        q_parts.append(q)
        assert torch.equal(k, k_full[:, rows]) and torch.equal(v, v_full[:, rows])
        # 本 rank 的 Q 头所属的 KV 组，正是它拿到的那个 KV 头（GQA 每组 q_heads // kv_heads 个头）
        assert r * (q_heads // tp) // (q_heads // kv_heads) == kv
    torch.testing.assert_close(torch.cat(q_parts, dim=-1), q_full)


def test_row_parallel_tp2_sum_equals_tp1_and_bias_is_added_once() -> None:
    torch.manual_seed(0)
    inter, hidden, tp = 24, 16, 2
    w, b = torch.randn(hidden, inter), torch.randn(hidden)
    x = torch.randn(5, inter)
    full = LinearRowParallel(inter, hidden, bias=True)
    full.load_state_dict({"weight": w, "bias": b})
    want = full(x)
    torch.testing.assert_close(want, F.linear(x, w, b))

    partial_sums = []
    for r in range(tp):
        with as_rank(r, tp):
            layer = LinearRowParallel(inter, hidden, bias=True)
        layer.load_state_dict({"weight": w.chunk(tp, dim=1)[r], "bias": b})
        # 行并行的输入也只是第 r 段（上一层列并行的输出天然就是这样切开的）
        partial_sums.append(layer.forward_local(x.chunk(tp, dim=-1)[r]))
    # all_reduce 做的就是这个加法；偏置在通信之后加一次
    torch.testing.assert_close(sum(partial_sums) + b, want)


def test_row_parallel_forward_needs_a_process_group() -> None:
    with as_rank(0, 2):
        layer = LinearRowParallel(8, 4)
    layer.load_state_dict({"weight": torch.randn(4, 4)})
    with pytest.raises(RuntimeError, match="torch.distributed is not initialized"):
        layer(torch.randn(2, 4))


def test_mlp_matches_transformers(tiny_model: Path, config: ModelConfig) -> None:
    """gate_up（合并列并行）→ silu_and_mul → down（行并行），和 transformers 的 Qwen3MLP 一致。"""
    torch.manual_seed(0)
    ref = Qwen3MLP(AutoConfig.from_pretrained(tiny_model))
    gate_up = LinearColParallelMerged(config.hidden_size, [config.intermediate_size] * 2)
    down = LinearRowParallel(config.intermediate_size, config.hidden_size)
    gate_up.load_state_dict(
        {"weight": torch.cat([ref.gate_proj.weight.data, ref.up_proj.weight.data])}
    )
    down.load_state_dict({"weight": ref.down_proj.weight.data})
    x = torch.randn(7, config.hidden_size)
    with torch.no_grad():
        want = ref(x)
    torch.testing.assert_close(down(silu_and_mul(gate_up(x))), want, rtol=1e-5, atol=1e-6)
