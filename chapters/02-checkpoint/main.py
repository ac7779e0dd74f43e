# %% [markdown]
# # 第 2 章：读懂 HF checkpoint——配置与流式权重加载
#
# 一个 Hugging Face 模型文件夹里有两样东西：描述结构的 `config.json`，和装着权重的
# `*.safetensors`。这一章把它们读懂：
#
# - `ModelConfig`：从 `config.json` 读出推理用到的十几个结构参数；
# - `Checkpoint` 和 `check_checkpoint`：只读 safetensors 文件开头的目录，不读数据，就和
#   `config.json` 对一遍账；
# - `load_weights`：按计划逐个读、把 q/k/v 和 gate/up 合并、按张量并行切分，
#   拼好一个交出一个，手里最多只有一个张量。
#
# 在仓库根目录运行：`python chapters/02-checkpoint/main.py`。用的是内嵌的小模型，几秒钟跑完。

# %%
from __future__ import annotations

import dataclasses
import math

from minisgl.distributed import DistributedInfo
from minisgl.models.config import ModelConfig
from minisgl.models.weight import (
    Checkpoint,
    CheckpointError,
    LoadStats,
    check_checkpoint,
    checkpoint_shapes,
    load_weights,
    plan_weights,
)
from minisgl.utils import (
    default_dtype,
    format_bytes,
    load_hf_config,
    load_tokenizer,
    pick_device,
    resolve_model_path,
)

MODEL = "models/tiny-qwen3"


def short(text: str) -> str:
    """打印时去掉第 0 层的前缀，行短一些。"""
    return text.replace("model.layers.0.", "")


# %% [markdown]
# ## 1. config.json → ModelConfig
#
# 本地文件夹原样使用；写成 `Qwen/Qwen3-0.6B` 这样的名字时，`resolve_model_path` 会从
# Hugging Face Hub 下载（只下配置、分词器和 safetensors）。`ModelConfig` 只留下推理用得到的字段。

# %%
path = resolve_model_path(MODEL)
hf = load_hf_config(path)
print(f"{path}/config.json 里有 {len(hf)} 个字段，ModelConfig 留下这些：")
config = ModelConfig.from_hf(hf)
for field in dataclasses.fields(config):
    print(f"  {field.name:<20} = {getattr(config, field.name)}")

tokenizer = load_tokenizer(path)
ids = tokenizer.encode("你好，世界")
print(f"分词器：{type(tokenizer).__name__}，{len(tokenizer)} 个词，'你好，世界' -> {ids}")
print(f"词表 {config.vocab_size} 行 > 分词器的 {len(tokenizer)} 个词：多出来的行是预留的空位")

# %% [markdown]
# RoPE 的参数有两种写法：transformers 4 是顶层的 `rope_theta` 加 `rope_scaling`，
# transformers 5 合成一个 `rope_parameters`。两种写法读出来是同一个 `RotaryConfig`；
# llama3、yarn 这些缩放参数原样留给第 3 章的 RoPE 算子。缺了必需的字段，报错里说出字段名。

# %%
llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
v4 = {**hf, "rope_parameters": None, "rope_theta": 5e5, "rope_scaling": llama3}
v5 = {**hf, "rope_parameters": {"rope_theta": 5e5, **llama3}, "rope_theta": None}
rotary4 = ModelConfig.from_hf(v4).rotary_config
print("transformers 4 的写法:", rotary4)
print("transformers 5 的写法一样:", ModelConfig.from_hf(v5).rotary_config == rotary4)
try:
    ModelConfig.from_hf({k: v for k, v in hf.items() if k != "num_hidden_layers"})
except ValueError as e:
    print("缺字段:", e)

# %% [markdown]
# ## 2. 只读目录就能对账
#
# safetensors 文件开头是一张目录：每个张量的名字、dtype、形状和位置。打开文件只读这张目录，
# 数据留在磁盘上。按 `config.json`，checkpoint 里应该有哪些张量、各是什么形状，是算得出来的；
# 两边一比，缺的、多的、形状不对的都能在读数据之前报出来。

# %%
with Checkpoint(path) as checkpoint:
    names = checkpoint.names
    total = sum(checkpoint.nbytes(n) for n in names)
    print(f"{len(checkpoint.files)} 个文件，{len(names)} 个张量，共 {format_bytes(total)}")
    for name in names:
        if not name.startswith("model.layers.") or name.startswith("model.layers.0."):
            shape, dtype = checkpoint.shape(name), checkpoint.dtype(name)
            print(f"  {short(name):<38} {list(shape)!s:<14} {dtype}")
    print("  （第 1 层与第 0 层相同）")
    check_checkpoint(checkpoint, config)
    print("对账通过")
    for wrong in [{"num_kv_heads": 1}, {"num_layers": 3}]:
        try:
            check_checkpoint(checkpoint, dataclasses.replace(config, **wrong))
        except CheckpointError as e:
            print(f"\n假如 config 写的是 {wrong}：\n{e}")

# %% [markdown]
# ## 3. 流式加载：拼好一个，交出一个
#
# 交出去的名字是引擎的叫法：`qkv_proj` 由 q、k、v 三个投影上下拼成，`gate_up_proj` 由
# gate、up 拼成。词嵌入和 LM head 共用（`tie_word_embeddings`）时不交出 `lm_head.weight`，
# 由模型直接用词嵌入那个张量——不在内存里多放一份。张量直接放到目标设备、转成目标精度。

# %%
device = pick_device()
dtype = default_dtype(device)
stats = LoadStats()
print(f"加载到 {device.type}，精度 {dtype}：")
for name, tensor in load_weights(path, config, dtype=dtype, device=device, stats=stats):
    if not name.startswith("model.layers.") or name.startswith("model.layers.0."):
        print(f"  {short(name):<38} {list(tensor.shape)}")
    del tensor  # 真正的模型在这里把它拷进自己的参数
print("  （第 1 层与第 0 层相同）")
print(
    f"从 checkpoint 读了 {stats.tensors_read} 块，拼成 {stats.tensors_yielded} 个张量交出去，"
    f"共 {format_bytes(stats.bytes_yielded)}"
)

# %% [markdown]
# ## 4. 张量并行：每个 rank 只拿自己那一份
#
# 切分规则是一张"计划"：每个目标由 checkpoint 里哪几个张量的哪几行、哪几列拼成。
# q/k/v、gate/up 按输出行切，o_proj、down_proj 按输入列切，norm 各 rank 一样，
# 词表按行切。下面是 tp=2 时 rank 0 和 rank 1 的第 0 层。

# %%
for rank in range(2):
    tp = DistributedInfo(rank, 2)
    print(f"tp=2, rank {rank}:")
    for target in plan_weights(config, tp):
        if "qkv" in target.name or "proj" in target.name or "embed" in target.name:
            if "layers.1." not in target.name:
                print("  " + short(str(target)).replace("self_attn.", "").replace("mlp.", ""))
    rank_stats = LoadStats()
    for _, tensor in load_weights(path, config, tp, stats=rank_stats):
        del tensor
    share = rank_stats.bytes_read / total
    print(f"  这个 rank 从 checkpoint 里取了 {format_bytes(rank_stats.bytes_read)}（{share:.1%}）")

# %% [markdown]
# KV 头比 rank 少时复制：tiny-qwen3 只有 2 个 KV 头，tp=4 时每个 rank 放 1 个，
# 第 r 个 rank 拿第 `r * 2 // 4` 个头——相邻的两个 rank 共用一个。
# 词表不能被 tp 整除时，每个 rank `ceil(vocab / tp)` 行，最后一个 rank 末尾补 0。

# %%
for rank in range(4):
    qkv = plan_weights(config, DistributedInfo(rank, 4))[2]
    q, k, v = (short(str(p)).replace("self_attn.", "") for p in qkv.pieces)
    print(f"tp=4, rank {rank}: {list(qkv.shape)} <- {q} + {k} + {v}")
odd = dataclasses.replace(config, vocab_size=len(tokenizer))
for rank in range(4):
    embed = plan_weights(odd, DistributedInfo(rank, 4))[0]
    print(f"词表 {odd.vocab_size}、tp=4, rank {rank}: {embed}")

# %% [markdown]
# ## 5. MoE：专家叠成一个三维张量
#
# Qwen3-MoE 的每一层有若干个专家，每个专家是一个小 MLP。加载时把同一层所有专家的 gate/up
# 合并后叠成 `(专家数, 2 × 中间维度, 隐藏维度)`，down 叠成 `(专家数, 隐藏维度, 中间维度)`；
# 张量并行切的是每个专家的中间维度。

# %%
moe_path = resolve_model_path("models/tiny-qwen3-moe")
moe = ModelConfig.from_pretrained(moe_path)
print(f"tiny-qwen3-moe：{moe.num_experts} 个专家，每个 token 选 {moe.num_experts_per_tok} 个")
for size in (1, 2):
    for name, tensor in load_weights(moe_path, moe, DistributedInfo(0, size)):
        if name.startswith("model.layers.0.mlp."):
            print(f"  tp={size}, rank 0: {short(name):<24} {list(tensor.shape)}")

# %% [markdown]
# ## 6. 不加载权重，算出 Qwen3-0.6B 有多少参数
#
# "checkpoint 里应该有什么"那张表只用到 `ModelConfig`。`models/qwen3-0.6b-shape` 只有真实
# Qwen3-0.6B 的 config.json，没有权重，照样能算出参数量和每个 rank 要放多少。

# %%
big = ModelConfig.from_pretrained("models/qwen3-0.6b-shape")
shapes = checkpoint_shapes(big)
params = sum(math.prod(s) for s in shapes.values())
embed = math.prod(shapes["model.embed_tokens.weight"])
print(f"Qwen3-0.6B：{big.num_layers} 层，隐藏维度 {big.hidden_size}，{len(shapes)} 个张量")
print(f"  参数 {params:,} 个，其中词嵌入 {embed:,}（与 LM head 共用），其余 {params - embed:,}")
print(f"  bf16 下 {format_bytes(params * 2)}")
for size in (1, 2, 4):
    local = sum(math.prod(t.shape) for t in plan_weights(big, DistributedInfo(0, size)))
    print(f"  tp={size}: 每个 rank {local:,} 个参数（{format_bytes(local * 2)}）")
