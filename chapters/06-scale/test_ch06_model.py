"""第 6 章：Qwen3-MoE 模型——结构（哪些层是 MoE、权重名）、和 transformers 逐步对照
（top-k 权重重新归一化开、关两种；near-tie 时停止比较 token）。"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Iterator

import pytest
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from minisgl.distributed import reset_tp_info
from minisgl.models import MODELS, ModelConfig, create_model, load_and_generate
from minisgl.models.qwen3 import MoEMLP
from minisgl.models.utils import GatedMLP
from minisgl.moe import MoELayer

STEPS = 32
MIN_COMPARED = 24
NEAR_TIE = 1e-3  # HF 的第一名领先第二名不到这么多时，谁排第一都说得过去：停止比较 token
ATOL = 5e-4
SHORT = [785, 6722, 315, 9625, 374]
CHAT = [151644, 872, 198, 11622, 105321, 109432, 107828, 1773, 151645, 198, 151644, 77091, 198]
CHAT += [151667, 271, 151668, 271]


@pytest.fixture(autouse=True)
def clean_tp() -> Iterator[None]:
    reset_tp_info()
    yield
    reset_tp_info()


@pytest.fixture(scope="module")
def moe_path(models_dir: Path) -> Path:
    return models_dir / "tiny-qwen3-moe"


def test_registered_and_every_layer_is_moe(moe_path: Path) -> None:
    assert "Qwen3MoeForCausalLM" in MODELS.names()
    config = ModelConfig.from_pretrained(moe_path)
    with torch.device("meta"):
        model = create_model(config)
    assert type(model).__name__ == "Qwen3MoeForCausalLM"
    for layer in model.model.layers:
        assert isinstance(layer.mlp, MoEMLP) and isinstance(layer.mlp.experts, MoELayer)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items() if ".layers.0.mlp." in k}
    e, i, h = config.num_experts, config.moe_intermediate_size, config.hidden_size
    assert shapes == {
        "model.layers.0.mlp.gate.weight": (e, h),
        "model.layers.0.mlp.experts.gate_up_proj": (e, 2 * i, h),
        "model.layers.0.mlp.experts.down_proj": (e, h, i),
    }


def test_dense_layers_follow_mlp_only_layers_and_sparse_step(moe_path: Path) -> None:
    """和 transformers 同样的规则：在 mlp_only_layers 里、或 (层号+1) 不是 decoder_sparse_step 的
    倍数的层，用中间维度为 intermediate_size 的稠密 MLP。"""
    config = ModelConfig.from_pretrained(moe_path)
    for changed, dense in [({"mlp_only_layers": (1,)}, {1}), ({"decoder_sparse_step": 2}, {0})]:
        with torch.device("meta"):
            model = create_model(dataclasses.replace(config, **changed))
        for i, layer in enumerate(model.model.layers):
            assert isinstance(layer.mlp, GatedMLP if i in dense else MoEMLP), (changed, i)
            if i in dense:
                gate_up = layer.mlp.gate_up_proj.weight
                assert gate_up.shape == (2 * config.intermediate_size, config.hidden_size)


@torch.no_grad()
def hf_greedy(hf: PreTrainedModel, prompt: list[int], steps: int) -> tuple[list[int], torch.Tensor]:
    """参照答案：transformers 自己的贪心生成（带 KV 缓存），每一步的原始 logits。
    ``eos_token_id=None``：生成到结束符也不停，和我们不带停止符的 greedy_generate 一样。"""
    out = hf.generate(
        torch.tensor([prompt]),
        max_new_tokens=steps,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
        output_logits=True,
        return_dict_in_generate=True,
    )
    return out.sequences[0, len(prompt) :].tolist(), torch.cat(out.logits).float()


@pytest.fixture(scope="module")
def no_renorm_path(moe_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """内嵌的 tiny-qwen3-moe 是 norm_topk_prob=true；关掉它的版本只改 config.json，
    其余文件用符号链接指向原来的。"""
    out = tmp_path_factory.mktemp("tiny-qwen3-moe-no-renorm")
    for f in moe_path.iterdir():
        if f.name != "config.json":
            (out / f.name).symlink_to(f.resolve())
    config = json.loads((moe_path / "config.json").read_text(encoding="utf-8"))
    config["norm_topk_prob"] = False
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return out


@pytest.fixture(scope="module", params=[True, False], ids=["renormalize", "no-renormalize"])
def moe_variant(
    request: pytest.FixtureRequest, moe_path: Path, no_renorm_path: Path
) -> tuple[Path, PreTrainedModel]:
    """(模型文件夹, transformers 加载的同一个模型)。"""
    path = moe_path if request.param else no_renorm_path
    return path, AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


@pytest.mark.parametrize("prompt", [SHORT, CHAT], ids=["short", "chat"])
def test_matches_transformers_step_by_step(
    moe_variant: tuple[Path, PreTrainedModel], prompt: list[int]
) -> None:
    path, hf = moe_variant
    config = ModelConfig.from_pretrained(path)
    assert hf.config.norm_topk_prob == config.norm_topk_prob
    ours = load_and_generate(path, [prompt], STEPS)
    want_tokens, want_logits = hf_greedy(hf, prompt, STEPS)
    assert ours.logits[0].shape == want_logits.shape == (STEPS, config.vocab_size)
    compared, worst = 0, 0.0
    for k in range(STEPS):
        # 到第 k 步为止两边的序列相同，第 k 步的 logits 可以直接比（第 0 步是 prefill）
        diff = (ours.logits[0][k] - want_logits[k]).abs().max().item()
        worst = max(worst, diff)
        assert diff < ATOL, f"step {k}: max |Δlogit| = {diff:.2e}"
        top2 = want_logits[k].topk(2).values
        if top2[0] - top2[1] <= NEAR_TIE:
            break  # near-tie：之后两边可能合理地分岔
        assert ours.token_ids[0][k] == want_tokens[k], f"step {k}"
        compared += 1
    print(f"norm_topk_prob={config.norm_topk_prob}: {compared} tokens, max |Δlogit| = {worst:.2e}")
    assert compared >= MIN_COMPARED


def test_renormalization_changes_the_output(moe_path: Path, no_renorm_path: Path) -> None:
    """关掉重新归一化，输出就变了：这个开关确实被用上了，而不是被忽略。"""
    on = load_and_generate(moe_path, [SHORT], 4)
    off = load_and_generate(no_renorm_path, [SHORT], 4)
    assert (on.logits[0] - off.logits[0]).abs().max().item() > 0.1
