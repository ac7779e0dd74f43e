"""第 3 章：RoPE——逆频率表与 transformers 的 ROPE_INIT_FUNCTIONS 对照，cos/sin 与旋转本身
与 Llama / Qwen3 的 rotary embedding 和 apply_rotary_pos_emb 对照；原地修改的约定。"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoConfig, PretrainedConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding, apply_rotary_pos_emb

from minisgl.layers import RotaryEmbedding, get_rope, rope_inv_freq
from minisgl.models.config import ModelConfig

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 512,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
SCALINGS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 2.0},
    "llama3": LLAMA3,
    "llama3-no-smoothing": {**LLAMA3, "low_freq_factor": 2.0, "high_freq_factor": 2.0},
    "yarn": YARN,
    "yarn-no-truncate": {**YARN, "truncate": False, "beta_fast": 16, "beta_slow": 2},
    # DeepSeek 的写法：mscale / mscale_all_dim 决定注意力系数
    "yarn-mscale": {**YARN, "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.707},
    "yarn-attention-factor": {**YARN, "attention_factor": 0.5},
}


def hf_config(folder: Path, scaling: dict[str, Any] | None) -> PretrainedConfig:
    """内嵌模型的 config.json，换上给定的 RoPE 缩放。"""
    d = json.loads((folder / "config.json").read_text())
    theta = d.pop("rope_theta")
    d.pop("rope_scaling", None)
    d["rope_parameters"] = {"rope_theta": theta, **(scaling or {"rope_type": "default"})}
    return AutoConfig.for_model(**d)


def ours_for(config: PretrainedConfig) -> RotaryEmbedding:
    """按 transformers 的配置建我们的 RoPE（scaling 去掉 rope_theta，同第 2 章的 RotaryConfig）。"""
    params = dict(config.rope_parameters)
    base = params.pop("rope_theta")
    scaling = None if params.get("rope_type") == "default" else params
    return RotaryEmbedding(
        config.head_dim, config.head_dim, config.max_position_embeddings, base, scaling
    )


@pytest.fixture(params=["tiny-qwen3", "tiny-llama"])
def folder(request: pytest.FixtureRequest, models_dir: Path) -> Path:
    return models_dir / request.param


@pytest.mark.parametrize("case", [k for k in SCALINGS if k != "default"])
def test_inv_freq_matches_rope_init_functions(folder: Path, case: str) -> None:
    scaling = SCALINGS[case]
    assert scaling is not None
    config = hf_config(folder, scaling)
    want, want_factor = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config)
    got, got_factor = rope_inv_freq(
        config.head_dim,
        config.rope_parameters["rope_theta"],
        scaling,
        config.max_position_embeddings,
    )
    assert torch.equal(got, want), (got, want)
    assert got_factor == pytest.approx(want_factor, rel=1e-12)


def test_default_inv_freq_matches_transformers(folder: Path) -> None:
    config = hf_config(folder, None)
    want, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    got, factor = rope_inv_freq(config.head_dim, config.rope_parameters["rope_theta"])
    assert torch.equal(got, want) and factor == 1.0


def test_yarn_attention_factor_is_applied_to_cos_and_sin() -> None:
    """yarn 把 cos/sin 整体放大 0.1·ln(factor) + 1 倍（官方实现漏掉了这一步）。"""
    rope = RotaryEmbedding(16, 16, 64, 10000.0, YARN)
    cos0, sin0 = rope.cos_sin_cache[0].chunk(2)
    assert torch.allclose(cos0, torch.full_like(cos0, 1.1386294361119891))
    assert torch.equal(sin0, torch.zeros_like(sin0))


@pytest.mark.parametrize("case", list(SCALINGS))
def test_cos_sin_cache_and_rotation_match_transformers(folder: Path, case: str) -> None:
    torch.manual_seed(0)
    config = hf_config(folder, SCALINGS[case])
    rotary_cls = Qwen3RotaryEmbedding if config.model_type == "qwen3" else LlamaRotaryEmbedding
    ref = rotary_cls(config)
    rope = ours_for(config)
    num_tokens, head_dim = 23, config.head_dim
    positions = torch.randint(0, config.max_position_embeddings, (num_tokens,))
    positions[:3] = torch.tensor([0, 1, config.max_position_embeddings - 1])

    x = torch.randn(1, num_tokens, head_dim)
    with torch.no_grad():
        cos, sin = ref(x, positions[None])  # (1, T, head_dim)：前后两半相同
    half = head_dim // 2
    cache = rope.cos_sin_cache[positions]
    assert torch.equal(cache[:, :half], cos[0, :, :half])
    assert torch.equal(cache[:, half:], sin[0, :, :half])

    # 旋转：transformers 的张量是 (batch, 头, token, head_dim)，我们的是 (token, 头 * head_dim)
    q = torch.randn(num_tokens, config.num_attention_heads, head_dim)
    k = torch.randn(num_tokens, config.num_key_value_heads, head_dim)
    want_q, want_k = apply_rotary_pos_emb(
        q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos, sin
    )
    q_flat, k_flat = q.reshape(num_tokens, -1), k.reshape(num_tokens, -1)
    got_q, got_k = rope(positions, q_flat, k_flat)
    assert got_q is q_flat and got_k is k_flat  # 原地
    torch.testing.assert_close(got_q.view_as(q), want_q[0].transpose(0, 1), rtol=0, atol=1e-6)
    torch.testing.assert_close(got_k.view_as(k), want_k[0].transpose(0, 1), rtol=0, atol=1e-6)


def test_rotation_writes_through_views_of_qkv() -> None:
    """第 4 章从 qkv 里 split 出 q、k 两个视图交给 RoPE：q、k 的列被改写，v 的列不动。"""
    torch.manual_seed(0)
    rope = RotaryEmbedding(8, 8, 32, 10000.0)
    qkv = torch.randn(5, (4 + 2 + 2) * 8)
    original = qkv.clone()
    q, k, v = qkv.split([32, 16, 16], dim=-1)
    positions = torch.arange(5) + 3
    rope(positions, q, k)
    q_ref, k_ref = original[:, :32].clone(), original[:, 32:48].clone()
    rope(positions, q_ref, k_ref)
    assert torch.equal(qkv[:, :32], q_ref) and torch.equal(qkv[:, 32:48], k_ref)
    assert torch.equal(qkv[:, 48:], original[:, 48:])
    assert not torch.equal(qkv[:, :32], original[:, :32])


def test_scores_depend_only_on_the_position_difference() -> None:
    torch.manual_seed(0)
    rope = RotaryEmbedding(16, 16, 256, 10000.0)
    q, k = torch.randn(1, 16), torch.randn(1, 16)

    def rotated(x: torch.Tensor, position: int) -> torch.Tensor:
        x = x.clone()
        rope(torch.tensor([position]), x, torch.zeros(1, 16))  # 只关心第一个参数
        return x

    def score(pq: int, pk: int) -> float:
        return float(rotated(q, pq) @ rotated(k, pk).T)

    assert score(10, 3) == pytest.approx(score(107, 100), abs=1e-4)
    assert score(10, 3) != pytest.approx(score(10, 4), abs=1e-3)


def test_partial_rotary_leaves_the_tail_alone() -> None:
    torch.manual_seed(0)
    partial = RotaryEmbedding(16, 8, 64, 10000.0)
    full_of_8 = RotaryEmbedding(8, 8, 64, 10000.0)
    positions = torch.tensor([0, 5, 63])
    q = torch.randn(3, 2 * 16)
    k = torch.randn(3, 16)
    q0, k0 = q.clone().view(3, 2, 16), k.clone().view(3, 1, 16)
    partial(positions, q, k)
    head = q0[..., :8].reshape(3, -1).clone()
    full_of_8(positions, head, k0[..., :8].reshape(3, -1).clone())
    assert torch.equal(q.view(3, 2, 16)[..., :8].reshape(3, -1), head)
    assert torch.equal(q.view(3, 2, 16)[..., 8:], q0[..., 8:])
    assert torch.equal(k.view(3, 1, 16)[..., 8:], k0[..., 8:])


def test_get_rope_shares_one_cache_per_config(tiny_model: Path) -> None:
    config = ModelConfig.from_pretrained(tiny_model).rotary_config
    a, b = get_rope(config), get_rope(config)
    assert a is b
    assert a.cos_sin_cache.shape == (config.max_position, config.rotary_dim)
    yarn = type(config)(
        config.head_dim, config.rotary_dim, config.max_position, config.base, dict(YARN)
    )
    assert get_rope(yarn) is not a
    assert get_rope(yarn) is get_rope(yarn)


def test_rope_has_no_state_and_builds_under_meta() -> None:
    """第 5 章在 meta 设备上建模型：cos/sin 表仍然要是真的数，而且不进状态字典。"""
    with torch.device("meta"):
        rope = RotaryEmbedding(16, 16, 64, 10000.0, YARN)
    assert rope.state_dict() == {}
    assert rope.cos_sin_cache.device.type == "cpu"
    assert rope.cos_sin_cache.dtype == torch.float32


def test_unsupported_scaling_is_an_error() -> None:
    with pytest.raises(ValueError, match="unsupported rope_type 'dynamic'"):
        RotaryEmbedding(16, 16, 64, 10000.0, {"rope_type": "dynamic", "factor": 2.0})
    with pytest.raises(ValueError, match="rotary_dim"):
        RotaryEmbedding(16, 7, 64, 10000.0)
