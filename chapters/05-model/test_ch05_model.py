"""第 5 章：模型的结构、登记表和加载——权重名与加载器一致、meta 上建结构、共用词嵌入、
严格加载、不认识的结构报错、在批次之外调用模型报错。"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator

import pytest
import torch

from minisgl.core import reset_global_ctx
from minisgl.distributed import reset_tp_info
from minisgl.layers import StateDictError
from minisgl.models import MODELS, ModelConfig, create_model, load_model
from minisgl.models.base import BaseLLMModel
from minisgl.models.llama import LlamaForCausalLM
from minisgl.models.qwen3 import Qwen3ForCausalLM
from minisgl.models.weight import load_weights, plan_weights

DENSE = ["tiny-qwen3", "tiny-llama"]


@pytest.fixture(autouse=True)
def clean_state() -> Iterator[None]:
    reset_global_ctx()
    reset_tp_info()
    yield
    reset_global_ctx()
    reset_tp_info()


def test_registry_lists_the_dense_architectures() -> None:
    assert {"LlamaForCausalLM", "Qwen3ForCausalLM"} <= set(MODELS.names())


def test_unknown_architecture_lists_the_supported_ones(tiny_model: Path) -> None:
    config = dataclasses.replace(
        ModelConfig.from_pretrained(tiny_model), architecture="GPT2LMHeadModel"
    )
    with pytest.raises(ValueError, match="GPT2LMHeadModel") as info:
        create_model(config)
    message = str(info.value)
    assert "supported:" in message
    assert "LlamaForCausalLM" in message and "Qwen3ForCausalLM" in message


@pytest.mark.until_chapter(5)
def test_moe_is_not_registered_yet(models_dir: Path) -> None:
    # Qwen3-MoE 的配置能读（第 2 章），模型要到第 6 章才有
    config = ModelConfig.from_pretrained(models_dir / "tiny-qwen3-moe")
    with pytest.raises(ValueError, match="Qwen3MoeForCausalLM"):
        create_model(config)


@pytest.mark.parametrize("name", DENSE)
def test_state_dict_names_and_shapes_match_the_loader_plan(models_dir: Path, name: str) -> None:
    # 模型的状态字典和第 2 章加载器要交出的张量一一对应：名字、形状都相同，一个不多一个不少
    config = ModelConfig.from_pretrained(models_dir / name)
    with torch.device("meta"):
        model = create_model(config)
    assert isinstance(model, BaseLLMModel)
    shapes = {k: tuple(t.shape) for k, t in model.state_dict().items()}
    assert shapes == {t.name: t.shape for t in plan_weights(config)}
    assert all(t.is_meta for t in model.state_dict().values())  # 建结构不分配内存


def test_model_classes_follow_the_config(models_dir: Path) -> None:
    qwen3 = ModelConfig.from_pretrained(models_dir / "tiny-qwen3")
    llama = ModelConfig.from_pretrained(models_dir / "tiny-llama")
    with torch.device("meta"):
        q, ll = create_model(qwen3), create_model(llama)
    assert type(q) is Qwen3ForCausalLM and type(ll) is LlamaForCausalLM
    assert "model.layers.1.self_attn.q_norm.weight" in q.state_dict()  # Qwen3 的 QK-Norm
    assert not any("q_norm" in k for k in ll.state_dict())
    # 共用词嵌入（tiny-qwen3）时 lm_head 没有自己的权重；tiny-llama 不共用
    assert "lm_head.weight" not in q.state_dict()
    assert "lm_head.weight" in ll.state_dict()


@pytest.mark.parametrize("name", DENSE)
def test_load_model_replaces_every_placeholder(models_dir: Path, name: str) -> None:
    model = load_model(models_dir / name, device="cpu", dtype=torch.float32)
    config = model.config
    loaded = model.state_dict()
    assert not any(t.is_meta for t in loaded.values())
    assert {t.dtype for t in loaded.values()} == {torch.float32}
    want = dict(load_weights(models_dir / name, config))
    assert loaded.keys() == want.keys()
    for key, tensor in want.items():
        assert torch.equal(loaded[key], tensor), key
    head = model.lm_head.local_weight  # type: ignore[attr-defined]
    if config.tie_word_embeddings:
        assert head is model.model.embed_tokens.weight  # type: ignore[attr-defined]
    else:
        assert head is loaded["lm_head.weight"]


def test_load_model_converts_dtype(tiny_model: Path) -> None:
    model = load_model(tiny_model, device="cpu", dtype=torch.bfloat16)
    assert {t.dtype for t in model.state_dict().values()} == {torch.bfloat16}


def test_strict_loading_catches_a_structure_mismatch(models_dir: Path) -> None:
    # 用 Llama 的权重去装 Qwen3 的结构：每层缺 q_norm/k_norm，一个都不换，报错列出名字
    config = ModelConfig.from_pretrained(models_dir / "tiny-llama")
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    weights = dict(load_weights(models_dir / "tiny-llama", config))
    with pytest.raises(StateDictError, match=r"missing keys: .*self_attn\.q_norm\.weight"):
        model.load_state_dict(weights)
    assert all(t.is_meta for t in model.state_dict().values())


def test_forward_needs_an_active_batch(tiny_model: Path) -> None:
    from minisgl.attention import NativeAttnBackend
    from minisgl.core import Context, set_global_ctx
    from minisgl.kvcache import create_kvcache_pool

    model = load_model(tiny_model, device="cpu", dtype=torch.float32)
    with pytest.raises(RuntimeError, match="global context is not set"):
        model.forward()
    pool = create_kvcache_pool(model.config, 4, 4, torch.float32, "cpu")
    table = torch.zeros(1, 16, dtype=torch.int32)
    set_global_ctx(
        Context(page_table=table, kv_cache=pool, attn_backend=NativeAttnBackend(pool, table))
    )
    with pytest.raises(RuntimeError, match="no active batch"):
        model.forward()
