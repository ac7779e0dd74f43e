"""第 2 章：ModelConfig.from_hf、utils/hf.py（本地文件夹、离线时的报错、分词器）、TP 信息。"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

import minisgl
from minisgl.distributed import DistributedInfo, get_tp_info, reset_tp_info, set_tp_info
from minisgl.models.config import ModelConfig, RotaryConfig
from minisgl.utils import get_log_rank, load_hf_config, load_tokenizer, resolve_model_path

PACKAGE_PARENT = str(Path(minisgl.__file__).resolve().parent.parent)


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- 三个内嵌模型与 0.6B 的形状


def test_from_hf_qwen3(tiny_model: Path) -> None:
    config = ModelConfig.from_hf(read_json(tiny_model / "config.json"))
    assert config.architecture == "Qwen3ForCausalLM" and config.model_type == "qwen3"
    assert (config.num_layers, config.hidden_size, config.intermediate_size) == (2, 64, 256)
    assert (config.num_qo_heads, config.num_kv_heads, config.head_dim) == (4, 2, 32)
    assert config.vocab_size == 151936 and config.rms_norm_eps == 1e-6
    assert config.tie_word_embeddings and not config.attention_bias
    assert config.has_qk_norm and not config.is_moe and config.num_experts == 0
    assert config.rotary_config == RotaryConfig(32, 32, 4096, 1e6, None)


def test_from_hf_llama(models_dir: Path) -> None:
    config = ModelConfig.from_pretrained(models_dir / "tiny-llama")
    assert (config.architecture, config.model_type) == ("LlamaForCausalLM", "llama")
    assert (config.num_qo_heads, config.num_kv_heads, config.head_dim) == (4, 4, 16)
    assert config.intermediate_size == 128 and config.rms_norm_eps == 1e-5
    assert not config.tie_word_embeddings and not config.has_qk_norm
    assert config.rotary_config.base == 500000.0 and config.rotary_config.scaling is None


def test_from_hf_qwen3_moe(models_dir: Path) -> None:
    config = ModelConfig.from_pretrained(models_dir / "tiny-qwen3-moe")
    assert config.model_type == "qwen3_moe" and config.is_moe and config.has_qk_norm
    assert (config.num_experts, config.num_experts_per_tok) == (4, 2)
    assert (config.moe_intermediate_size, config.intermediate_size) == (64, 256)
    assert config.norm_topk_prob is True
    assert [config.is_moe_layer(i) for i in range(config.num_layers)] == [True, True]


def test_from_hf_qwen3_0_6b_shape(models_dir: Path) -> None:
    config = ModelConfig.from_pretrained(models_dir / "qwen3-0.6b-shape")
    assert (config.num_layers, config.hidden_size, config.intermediate_size) == (28, 1024, 3072)
    assert (config.num_qo_heads, config.num_kv_heads, config.head_dim) == (16, 8, 128)
    # head_dim 不是 hidden_size // num_heads（1024 // 16 = 64）：Qwen3 写明了 128
    assert config.num_qo_heads * config.head_dim == 2048 != config.hidden_size
    assert config.rotary_config.max_position == 40960
    assert config.rotary_config.base == 1e6


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-llama", "tiny-qwen3-moe", "qwen3-0.6b-shape"])
def test_agrees_with_transformers(models_dir: Path, name: str) -> None:
    """同一个 config.json，我们读出来的数和 transformers 的 AutoConfig 一致。"""
    from transformers import AutoConfig

    hf = AutoConfig.from_pretrained(models_dir / name)
    ours = ModelConfig.from_pretrained(models_dir / name)
    assert ours.num_layers == hf.num_hidden_layers
    assert ours.num_qo_heads == hf.num_attention_heads
    assert ours.num_kv_heads == hf.num_key_value_heads
    assert ours.head_dim == hf.head_dim
    assert ours.vocab_size == hf.vocab_size
    assert ours.tie_word_embeddings == hf.tie_word_embeddings
    assert ours.rotary_config.base == hf.rope_parameters["rope_theta"]
    assert ours.rotary_config.max_position == hf.max_position_embeddings


# ---------------------------------------------------------------- RoPE 的几种写法


def llama_dict(**changes: Any) -> dict[str, Any]:
    """一个最小的 Llama config.json；changes 里值为 None 的键会被删掉。"""
    hf: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
    }
    hf.update(changes)
    return {k: v for k, v in hf.items() if v is not None}


LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def test_transformers5_rope_parameters_only() -> None:
    """transformers 5 保存的 config 只有 rope_parameters，没有顶层的 rope_theta。"""
    hf = llama_dict(rope_theta=None, rope_parameters={"rope_theta": 1e6, "rope_type": "default"})
    rotary = ModelConfig.from_hf(hf).rotary_config
    assert rotary.base == 1e6 and rotary.scaling is None


def test_rope_scaling_llama3_is_preserved() -> None:
    """transformers 4 的写法：顶层 rope_theta + rope_scaling。缩放参数原样留给第 3 章。"""
    rotary = ModelConfig.from_hf(llama_dict(rope_scaling=dict(LLAMA3))).rotary_config
    assert rotary.base == 500000.0
    assert rotary.scaling == LLAMA3


def test_rope_parameters_yarn_drops_theta() -> None:
    params = {"rope_theta": 1e6, **YARN}
    rotary = ModelConfig.from_hf(llama_dict(rope_theta=None, rope_parameters=params)).rotary_config
    assert rotary.base == 1e6
    assert rotary.scaling == YARN  # rope_theta 已经放进 base，不再留在 scaling 里


def test_old_type_key_and_default_theta() -> None:
    rotary = ModelConfig.from_hf(
        llama_dict(rope_theta=None, rope_scaling={"type": "linear", "factor": 2.0})
    ).rotary_config
    assert rotary.scaling == {"type": "linear", "factor": 2.0, "rope_type": "linear"}
    assert rotary.base == 10000.0  # 哪里都没写 rope_theta：transformers 的默认值


@pytest.mark.parametrize("scaling", [LLAMA3, YARN])
def test_rope_agrees_with_transformers(scaling: dict[str, Any]) -> None:
    """transformers 把 4.x 写法转换成 rope_parameters；我们的 base + scaling 与之一致。"""
    from transformers import LlamaConfig

    hf = llama_dict(rope_scaling=dict(scaling))
    reference = LlamaConfig(**hf).rope_parameters
    rotary = ModelConfig.from_hf(hf).rotary_config
    assert rotary.scaling is not None
    assert {**rotary.scaling, "rope_theta": rotary.base} == reference


def test_partial_rotary_factor() -> None:
    rotary = ModelConfig.from_hf(llama_dict(partial_rotary_factor=0.5)).rotary_config
    assert (rotary.head_dim, rotary.rotary_dim) == (16, 8)


# ---------------------------------------------------------------- 默认值与报错


def test_defaults_for_optional_fields() -> None:
    config = ModelConfig.from_hf(llama_dict(num_key_value_heads=None, architectures=None))
    assert config.num_kv_heads == 4  # 没写就和 Q 头一样多
    assert config.head_dim == 16  # 没写 head_dim：hidden_size // num_attention_heads
    assert config.architecture == "LlamaForCausalLM"
    assert config.hidden_act == "silu" and config.tie_word_embeddings is False


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"hidden_size": None}, "missing required field 'hidden_size'"),
        ({"vocab_size": "100"}, "vocab_size must be an integer >= 1, got '100'"),
        ({"num_hidden_layers": True}, "num_hidden_layers must be an integer"),
        ({"num_key_value_heads": 3}, "num_attention_heads=4 is not a multiple of"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
        ({"model_type": "gemma"}, "'gemma' is not supported; supported: llama, qwen3"),
        ({"hidden_size": 66, "head_dim": None}, "hidden_size=66 is not divisible"),
        ({"rope_theta": None, "rope_parameters": {"rope_theta": "x"}}, "rope_theta must be"),
        ({"rope_scaling": [1, 2]}, "rope_scaling must be an object"),
    ],
)
def test_bad_configs_name_the_field(changes: dict[str, Any], message: str) -> None:
    hf = llama_dict()
    hf.update(changes)
    hf = {k: v for k, v in hf.items() if v is not None}
    with pytest.raises(ValueError, match="config.json: ") as info:
        ModelConfig.from_hf(hf)
    assert message in str(info.value)


def test_moe_layer_rules() -> None:
    hf = llama_dict(
        model_type="qwen3_moe",
        num_hidden_layers=6,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        decoder_sparse_step=2,
        mlp_only_layers=[3],
    )
    config = ModelConfig.from_hf(hf)
    # 第 1、3、5 层（从 0 数）满足 (i + 1) % 2 == 0，其中第 3 层被 mlp_only_layers 排除
    assert [config.is_moe_layer(i) for i in range(6)] == [False, True, False, False, False, True]
    with pytest.raises(ValueError, match="missing required field 'num_experts'"):
        ModelConfig.from_hf(llama_dict(model_type="qwen3_moe"))
    with pytest.raises(ValueError, match="num_experts_per_tok=9 is larger than num_experts=8"):
        ModelConfig.from_hf({**hf, "num_experts_per_tok": 9})


def test_config_is_frozen_and_hashable(tiny_model: Path) -> None:
    config = ModelConfig.from_pretrained(tiny_model)
    with pytest.raises(AttributeError):
        config.num_layers = 3  # type: ignore[misc]
    llama3 = ModelConfig.from_hf(llama_dict(rope_scaling=dict(LLAMA3)))
    assert len({config, ModelConfig.from_pretrained(tiny_model), llama3}) == 2


# ---------------------------------------------------------------- utils/hf.py


def test_resolve_local_folder(tiny_model: Path, tmp_path: Path) -> None:
    assert resolve_model_path(tiny_model) == tiny_model  # 本地文件夹原样返回
    assert resolve_model_path(str(tiny_model)) == tiny_model
    file = tmp_path / "weights.bin"
    file.write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        resolve_model_path(file)
    # 明显是本地路径（绝对路径、多级目录）：不去 Hub 碰运气，直接说不存在
    with pytest.raises(FileNotFoundError, match="model folder .* does not exist"):
        resolve_model_path(tmp_path / "no" / "such" / "model")


def test_hub_id_offline_gives_a_clear_error(tmp_path: Path) -> None:
    """不是本地文件夹，就当作 Hub 上的名字。离线又没有缓存时，报错里说清两边各是怎么失败的。

    在子进程里跑：huggingface_hub 在导入时读 HF_HUB_OFFLINE；HF_HOME 指向空目录，保证没有缓存。
    """
    code = textwrap.dedent(
        """
        from minisgl.utils import resolve_model_path
        try:
            resolve_model_path("minisgl-test/no-such-model")
        except FileNotFoundError as e:
            print(e)
        """
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")]),
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp_path),
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    message = result.stdout
    assert "'minisgl-test/no-such-model' is not a local folder" in message
    assert "getting it from the Hugging Face Hub failed" in message
    assert "HF_HUB_OFFLINE" in message  # huggingface_hub 自己的说明也在里面


def test_load_hf_config(tiny_model: Path, tmp_path: Path) -> None:
    hf = load_hf_config(tiny_model)
    assert hf["model_type"] == "qwen3" and hf["rope_parameters"]["rope_theta"] == 1e6
    with pytest.raises(FileNotFoundError, match="no config.json in"):
        load_hf_config(tmp_path)


def test_load_tokenizer(tiny_model: Path) -> None:
    tokenizer = load_tokenizer(tiny_model)
    ids = tokenizer.encode("你好，mini-sglang!")
    assert tokenizer.decode(ids) == "你好，mini-sglang!"
    assert tokenizer.eos_token == "<|im_end|>"
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>user" in text and text.endswith("<|im_start|>assistant\n")


def test_chat_template_json_fallback(tiny_model: Path, tmp_path: Path) -> None:
    """聊天模板单独放在 chat_template.json 里的仓库，也能拿到模板。"""
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(tiny_model / "tokenizer.json", folder)
    tok_config = read_json(tiny_model / "tokenizer_config.json")
    tok_config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config), encoding="utf-8")
    assert not getattr(load_tokenizer(folder), "chat_template", None)
    template = "{% for m in messages %}[{{ m['content'] }}]{% endfor %}"
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    tokenizer = load_tokenizer(folder)
    assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == (
        "[hi]"
    )


# ---------------------------------------------------------------- distributed/info.py


@pytest.fixture
def clean_tp() -> Iterator[None]:
    reset_tp_info()
    yield
    reset_tp_info()


def test_tp_info_defaults_to_single_process(clean_tp: None) -> None:
    info = get_tp_info()
    assert info == DistributedInfo(0, 1) and info.is_primary()
    assert get_log_rank() is None


def test_set_tp_info(clean_tp: None) -> None:
    info = set_tp_info(1, 4)
    assert get_tp_info() is info and (info.rank, info.size) == (1, 4)
    assert not info.is_primary()
    assert get_log_rank() == 1  # 多 rank 时日志行首带上 rank
    assert set_tp_info(1, 4) == info  # 重复设置同样的值没问题
    with pytest.raises(RuntimeError, match="already set to rank=1, size=4"):
        set_tp_info(0, 4)
    reset_tp_info()
    assert get_tp_info() == DistributedInfo(0, 1) and get_log_rank() is None
    set_tp_info(0, 1)
    assert get_log_rank() is None  # 单卡不标 rank


@pytest.mark.parametrize(("rank", "size"), [(2, 2), (-1, 2), (0, 0)])
def test_invalid_tp_info(clean_tp: None, rank: int, size: int) -> None:
    with pytest.raises(ValueError, match="tp (rank|size)"):
        set_tp_info(rank, size)
    assert get_tp_info() == DistributedInfo(0, 1)  # 失败的设置不留下痕迹
