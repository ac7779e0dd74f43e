# %% [markdown]
# # 第 3 章：算子层——BaseOP、线性层、Embedding、RMSNorm、RoPE、激活
#
# 这一章写出搭模型用的全部积木，并逐个和 transformers 的实现对照：
#
# - `BaseOP`：不继承 `nn.Module` 的层，权重是普通张量，按带点的名字严格加载；
# - 线性层：复制、列并行、行并行、合并的 qkv / gate_up，形状由配置和 TP 信息决定；
# - 词表并行的 embedding 和只算最后一个 token 的 LM head；
# - RMSNorm 与"加残差再归一化"、RoPE（default / llama3 / yarn）、门控激活。
#
# 在仓库根目录运行：`python chapters/03-operators/main.py`。有 GPU 时在 GPU 上算，
# 没有时在 CPU 上算，一律用 float32，好和参考实现比较误差。

# %%
from __future__ import annotations

import contextlib
import json
import unicodedata
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from transformers import AutoConfig, PretrainedConfig
from transformers.activations import ACT2FN
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.qwen3.modeling_qwen3 import (
    Qwen3MLP,
    Qwen3RMSNorm,
    Qwen3RotaryEmbedding,
    apply_rotary_pos_emb,
)

from minisgl.distributed import reset_tp_info, set_tp_info
from minisgl.layers import (
    BaseOP,
    LinearColParallelMerged,
    LinearQKVMerged,
    LinearRowParallel,
    OPList,
    ParallelLMHead,
    RMSNorm,
    RMSNormFused,
    RotaryEmbedding,
    StateDictError,
    VocabParallelEmbedding,
    get_act_and_mul,
    get_rope,
)
from minisgl.models.config import ModelConfig
from minisgl.utils import pick_device

device = pick_device()
torch.set_default_device(device)  # 层里的 torch.empty、下面的 randn 都建在这个设备上
torch.manual_seed(0)
print("设备:", device)


def report(name: str, got: torch.Tensor, want: torch.Tensor, tol: float = 1e-5) -> None:
    """打印最大绝对误差；不超过 tol 打 ✓。"""
    err = (got.float() - want.float()).abs().max().item()
    width = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in name)
    print(f"  {name}{' ' * max(38 - width, 1)}最大误差 {err:.1e}  {'✓' if err <= tol else '✗'}")


@contextlib.contextmanager
def as_rank(rank: int, size: int) -> Iterator[None]:
    """假装本进程是 size 个 rank 里的第 rank 个：这期间建的层按这个 TP 信息切形状。"""
    reset_tp_info()
    set_tp_info(rank, size)
    try:
        yield
    finally:
        reset_tp_info()


# %% [markdown]
# ## 1. BaseOP：权重是普通张量，名字带点，加载是严格的
#
# 属性是张量就是权重，属性是 `BaseOP` 就递归进去，下划线开头的不算。`OPList` 用下标当名字。
# 加载时缺了的、多出来的、形状或 dtype 不对的一次全部报出来，而且一个权重也不替换。


# %%
class Block(BaseOP):
    def __init__(self) -> None:
        self.norm = RMSNorm(4, eps=1e-6)
        self.proj = LinearRowParallel(4, 4)
        self._scratch = torch.zeros(4)  # 下划线开头：不是状态


class Tiny(BaseOP):
    def __init__(self) -> None:
        self.layers = OPList([Block(), Block()])
        self.norm = RMSNorm(4, eps=1e-6)


model = Tiny()
state = {name: torch.randn(t.shape) for name, t in model.state_dict().items()}
print("状态字典:", list(state))
model.load_state_dict(state)
loaded = model.layers[1].norm.weight
print("加载是替换，不是拷贝:", loaded is state["layers.1.norm.weight"])

bad = dict(state)
del bad["norm.weight"]
bad["layers.2.norm.weight"] = torch.ones(4)
bad["layers.0.proj.weight"] = torch.ones(4, 2)
bad["layers.1.norm.weight"] = torch.ones(4, dtype=torch.float64)
try:
    model.load_state_dict(bad)
except StateDictError as e:
    print(e)
print("加载失败之后权重原封不动:", model.layers[1].norm.weight is loaded)

# %% [markdown]
# ## 2. 线性层：形状来自配置和 TP 信息
#
# 内嵌的 tiny-qwen3：隐藏维度 64，4 个 Q 头、2 个 KV 头，每个头 32 维，MLP 中间维度 256。
# tp=4 时 KV 头不够分，每个 rank 放一个 KV 头的副本。

# %%
config = ModelConfig.from_pretrained("models/tiny-qwen3")
h, d, inter = config.hidden_size, config.head_dim, config.intermediate_size
for tp in (1, 2, 4):
    with as_rank(0, tp):
        qkv = LinearQKVMerged(h, d, config.num_qo_heads, config.num_kv_heads)
        gate_up = LinearColParallelMerged(h, [inter, inter])
        o_proj = LinearRowParallel(config.num_qo_heads * d, h)
        down = LinearRowParallel(inter, h)
    print(
        f"tp={tp}: qkv {tuple(qkv.weight.shape)}（q/k/v 各 {qkv.local_output_sizes} 行）"
        f"  gate_up {tuple(gate_up.weight.shape)}"
        f"  o_proj {tuple(o_proj.weight.shape)}  down {tuple(down.weight.shape)}"
    )

# %% [markdown]
# 和 transformers 的 `Qwen3MLP` 对照：gate、up 两个矩阵上下拼成一个 `gate_up_proj`，
# 一次矩阵乘之后 `silu_and_mul` 把结果劈成两半。

# %%
ref_mlp = Qwen3MLP(AutoConfig.from_pretrained("models/tiny-qwen3")).to(device)
gate_up = LinearColParallelMerged(h, [inter, inter])
down = LinearRowParallel(inter, h)
merged = torch.cat([ref_mlp.gate_proj.weight, ref_mlp.up_proj.weight]).detach()
gate_up.load_state_dict({"weight": merged})
down.load_state_dict({"weight": ref_mlp.down_proj.weight.detach()})
act = get_act_and_mul(config.hidden_act)
x = torch.randn(7, h)
with torch.no_grad():
    report("MLP vs Qwen3MLP", down(act(gate_up(x))), ref_mlp(x))

# %% [markdown]
# ## 3. 在一个进程里模拟 tp=2 的行并行
#
# 行并行按输入维切：rank r 持有 `W` 的第 r 段列，输入也只是第 r 段。每个 rank 得到完整形状的
# **部分和**，`all_reduce` 把它们加起来。单进程里没有别的 rank 可以通信，所以直接调用
# `forward_local` 拿到部分和、自己相加——这正是 all_reduce 做的事。两个真进程的版本在本章的测试里。

# %%
w, b = torch.randn(h, inter), torch.randn(h)
x = torch.randn(5, inter)
full = LinearRowParallel(inter, h, bias=True)
full.load_state_dict({"weight": w, "bias": b})
want = full(x)
partial_sums = []
for r in range(2):
    with as_rank(r, 2):
        layer = LinearRowParallel(inter, h, bias=True)
    layer.load_state_dict({"weight": w.chunk(2, dim=1)[r], "bias": b})
    x_r = x.chunk(2, dim=-1)[r]
    partial_sums.append(layer.forward_local(x_r))
    shapes = [tuple(t.shape) for t in (layer.weight, x_r, partial_sums[-1])]
    print(f"rank {r}: 权重 {shapes[0]}，输入 {shapes[1]}，部分和 {shapes[2]}")
report("tp=2：两个部分和相加 + bias", partial_sums[0] + partial_sums[1] + b, want, tol=1e-4)
gap = (partial_sums[0] + b - want).abs().max().item()
print(f"只用 rank 0 的部分和：最多差 {gap:.0f}——少了另一半，所以必须 all_reduce")
with as_rank(0, 2):
    layer = LinearRowParallel(inter, h)
try:
    layer(torch.randn(5, inter // 2))
except RuntimeError as e:
    print("没有初始化进程组就调用 forward:", e)

# %% [markdown]
# ## 4. 词表并行的 embedding 和 LM head
#
# 词表 10 个 token 分给 3 个 rank：每个 rank ceil(10/3) = 4 行，最后一个 rank 只有 2 个真 token，
# 另外 2 行是补出来的。查表时不在本段的 token 输出 0，各 rank 相加后每个 token 恰好取到一行。

# %%
vocab, dim, tp = 10, 6, 3
table = torch.randn(vocab, dim)
ids = torch.tensor([0, 9, 3, 4, 7, 8])
partials = []
for r in range(tp):
    with as_rank(r, tp):
        emb = VocabParallelEmbedding(vocab, dim)
    start, end = emb.vocab_range
    padding = torch.zeros(emb.num_embeddings_local - (end - start), dim)
    emb.load_state_dict({"weight": torch.cat([table[start:end], padding])})
    partials.append(emb.forward_local(ids))
    hit = [t for t in ids.tolist() if start <= t < end]
    print(f"rank {r}: 负责 token [{start}, {end})，{emb.num_embeddings_local} 行；本批查得到 {hit}")
report("3 个 rank 相加 vs F.embedding", sum(partials), F.embedding(ids, table), tol=0)

# %% [markdown]
# LM head 只为每个请求的最后一个 token 算 logits。三个请求一起 prefill，长度 3、1、4，
# 隐状态首尾相接共 8 行；最后一个 token 的行号是长度的前缀和减 1。

# %%
lengths = torch.tensor([3, 1, 4])
last = torch.cumsum(lengths, 0) - 1
hidden = torch.randn(int(lengths.sum()), dim)
emb = VocabParallelEmbedding(vocab, dim)
emb.load_state_dict({"weight": table})
head = ParallelLMHead(vocab, dim, tied_embedding=emb)  # 与 embedding 共享权重
logits = head(hidden, last)
print("最后一个 token 的行号:", last.tolist(), " logits 形状:", tuple(logits.shape))
print("共享权重的 LM head 没有自己的状态:", head.state_dict())
report("LM head vs hidden[last] @ table.T", logits, hidden[last] @ table.T)

# %% [markdown]
# ## 5. RMSNorm 与"加残差再归一化"
#
# `RMSNormFused.forward(x, residual)` 原地改写两个输入：`residual ← x + residual`，
# `x ← norm(x + residual)`，返回的就是这两个对象。

# %%
weight = 1 + 0.1 * torch.randn(h)
norm = RMSNorm(h, config.rms_norm_eps)
norm.load_state_dict({"weight": weight})
ref_norm = Qwen3RMSNorm(h, eps=config.rms_norm_eps).to(device)
ref_norm.weight.data.copy_(weight)
x = 3 * torch.randn(7, h)
with torch.no_grad():
    report("RMSNorm vs Qwen3RMSNorm", norm(x), ref_norm(x))

fused = RMSNormFused(h, config.rms_norm_eps)
fused.load_state_dict({"weight": weight})
x, residual = torch.randn(7, h), torch.randn(7, h)
x0, r0 = x.clone(), residual.clone()
out, new_residual = fused(x, residual)
print("返回的就是传进去的 x 和 residual:", out is x, new_residual is residual)
report("residual == x + residual", residual, x0 + r0, tol=0)
with torch.no_grad():
    report("x == Qwen3RMSNorm(x + residual)", x, ref_norm(x0 + r0))

# %% [markdown]
# ## 6. RoPE：default、llama3、yarn
#
# 和 transformers 的 rotary embedding 比 cos/sin 表，再和 `apply_rotary_pos_emb` 比旋转之后的 q、k。
# llama3 和 yarn 的参数写在 config.json 的 `rope_scaling` 里；这里给内嵌的 tiny-llama 换上它们。

# %%
SCALINGS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 512,
    },
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
}


def with_scaling(
    folder: str, scaling: dict[str, Any] | None
) -> tuple[PretrainedConfig, ModelConfig]:
    """内嵌模型的 config.json 换上给定的 RoPE 缩放：transformers 的配置和我们的配置各一份。"""
    raw = json.loads(Path(folder, "config.json").read_text())
    theta = raw.pop("rope_theta")
    raw["rope_parameters"] = {"rope_theta": theta, **(scaling or {"rope_type": "default"})}
    raw.pop("rope_scaling", None)
    return AutoConfig.for_model(**raw), ModelConfig.from_hf(raw)


def tokens_first(t: torch.Tensor) -> torch.Tensor:
    """transformers 的 (1, 头, token, head_dim) → 我们的 (token, 头 * head_dim)。"""
    return t[0].transpose(0, 1).reshape(t.shape[2], -1)


T = 16
for folder, kinds in [("models/tiny-qwen3", ["default"]), ("models/tiny-llama", list(SCALINGS))]:
    for kind in kinds:
        hf, ours = with_scaling(folder, SCALINGS[kind])
        rotary_cls = Qwen3RotaryEmbedding if hf.model_type == "qwen3" else LlamaRotaryEmbedding
        ref = rotary_cls(hf).to(device)
        rope = get_rope(ours.rotary_config)
        positions = torch.randint(0, ours.rotary_config.max_position, (T,))
        q = torch.randn(1, hf.num_attention_heads, T, hf.head_dim)
        k = torch.randn(1, hf.num_key_value_heads, T, hf.head_dim)
        with torch.no_grad():
            cos, sin = ref(q, positions[None])  # (1, T, head_dim)，前后两半相同
            want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin)
        got_q, got_k = rope(positions, tokens_first(q), tokens_first(k))  # 原地旋转
        half = hf.head_dim // 2
        print(f"{Path(folder).name} · {kind}：attention_factor = {ref.attention_scaling:.4f}")
        want_table = torch.cat([cos[0, :, :half], sin[0, :, :half]], dim=-1)
        report("cos/sin 表", rope.cos_sin_cache[positions], want_table)
        report("旋转之后的 q", got_q, tokens_first(want_q))
        report("旋转之后的 k", got_k, tokens_first(want_k))

try:
    RotaryEmbedding(32, 32, 4096, 1e6, {"rope_type": "dynamic", "factor": 2.0})
except ValueError as e:
    print("不支持的缩放:", e)

# %% [markdown]
# ## 7. 门控激活：act(gate) * up

# %%
gate, up = torch.randn(5, 32), torch.randn(5, 32)
for name in ("silu", "gelu", "gelu_pytorch_tanh"):
    got = get_act_and_mul(name)(torch.cat([gate, up], dim=-1))
    report(f"{name}_and_mul vs ACT2FN", got, ACT2FN[name](gate) * up)
try:
    get_act_and_mul("relu2")
except ValueError as e:
    print("不支持的激活:", e)
