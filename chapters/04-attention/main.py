# %% [markdown]
# # 第 4 章：注意力——Batch/Context、页表、KV 池与注意力后端
#
# 这一章让一个批次穿过一层注意力。批次里有三个长短不一的请求，其中一个的前缀已经算过、
# K/V 早就躺在 KV 池里。我们手工做第 8 章调度器要做的事——分配页、填页表、拼批次——
# 然后用 `AttentionLayer` 和原生后端算注意力，再和"不分页、不缓存、整段重算"的稠密因果注意力比较。
#
# 在仓库根目录运行：`python chapters/04-attention/main.py`。有 GPU 时在 GPU 上算，
# 没有时在 CPU 上算，一律用 float32，好比较误差。

# %%
from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from minisgl.attention import create_attention_backend, page_slots, prepare_batch
from minisgl.attention.native import attention, extend_causal_mask
from minisgl.core import Batch, Context, Req, get_global_ctx, reset_global_ctx, set_global_ctx
from minisgl.kvcache import create_kvcache_pool
from minisgl.layers import AttentionLayer, RMSNorm
from minisgl.models.config import ModelConfig
from minisgl.utils import div_ceil, format_bytes, pick_device

device = pick_device()
config = ModelConfig.from_pretrained("models/tiny-qwen3")
H_Q, H_KV, D = config.num_qo_heads, config.num_kv_heads, config.head_dim
print(f"tiny-qwen3：{H_Q} 个 Q 头、{H_KV} 个 KV 头（每 {H_Q // H_KV} 个 Q 头共用一个），D={D}")

# %% [markdown]
# ## 1. 三个请求，以及它们的 qkv
#
# 这一章没有模型，只有一层注意力。它的输入是 qkv 投影的输出：每个 token 一行，
# `(H_Q + 2 * H_KV) * D` 列。我们直接随机生成三个请求**全部** token 的 qkv，
# 每一步从中取出这一步的新 token 那几行——就像模型每一步只对新 token 做投影。
#
# | 请求 | 第 0 步 | 第 1 步（prefill 批次） | 第 2 步（decode 批次） | 最终长度 |
# |---|---|---|---|---|
# | A | | 新的 6 个 token | 1 个 | 7 |
# | B | 前缀 4 个 token | 缓存 4 个 + 新的 3 个 | 1 个 | 8 |
# | C | | 新的 2 个 token | 1 个 | 3 |

# %%
NAMES = "ABC"
LENGTHS = {"A": 7, "B": 8, "C": 3}
gen = torch.Generator().manual_seed(0)  # 在 CPU 上生成再搬过去：各设备上的输入完全相同
QKV = {n: torch.randn(LENGTHS[n], (H_Q + 2 * H_KV) * D, generator=gen) for n in NAMES}
QKV = {n: t.to(device) for n, t in QKV.items()}
TOKENS = {n: torch.randint(0, config.vocab_size, (LENGTHS[n],), generator=gen) for n in NAMES}

# Qwen3 对每个头的 q、k 做 RMSNorm；权重本该来自 checkpoint，这里随机取一组不全为 1 的
q_norm, k_norm = RMSNorm(D, config.rms_norm_eps), RMSNorm(D, config.rms_norm_eps)
for norm in (q_norm, k_norm):
    norm.load_state_dict({"weight": (1 + 0.2 * torch.randn(D, generator=gen)).to(device)})
layer = AttentionLayer(0, H_Q, H_KV, D, config.rotary_config, q_norm=q_norm, k_norm=k_norm)

# %% [markdown]
# ## 2. KV 池与页表
#
# KV 池是一整块预先分配的张量：`(2, 层数, 页数, page_size, KV 头数, head_dim)`。
# 页表每行属于一个请求，第 i 列是这个请求第 i 个 token 的 K/V 所在的**槽位**；
# 第 p 页是槽位 `p*page_size .. p*page_size + page_size - 1`。
# 分配页是第 8 章调度器的事，这里手工做：从一个打乱的空闲页列表里依次取，
# 所以一个请求的页不必相邻，但每页之内的槽位是连续的。

# %%
ROWS = {"A": 0, "B": 1, "C": 2}  # 请求 → 页表的行
NUM_SLOTS = 64


def build_context(page_size: int, verbose: bool = False) -> Context:
    kv_cache = create_kvcache_pool(config, NUM_SLOTS // page_size, page_size, torch.float32, device)
    page_table = torch.zeros(4, 16, dtype=torch.int32, device=device)
    free = torch.randperm(kv_cache.num_pages, generator=torch.Generator().manual_seed(1)).tolist()
    for name, row in ROWS.items():
        n = div_ceil(LENGTHS[name], page_size)
        pages, free = free[:n], free[n:]
        page_table[row, : LENGTHS[name]] = page_slots(pages, page_size, LENGTHS[name]).to(device)
        if verbose:
            slots = page_table[row, : LENGTHS[name]].tolist()
            print(f"  第 {row} 行（{name}，{LENGTHS[name]} 个 token）：页 {pages} → 槽位 {slots}")
    backend = create_attention_backend("torch", config, kv_cache, page_table)
    return Context(page_table=page_table, kv_cache=kv_cache, attn_backend=backend)


print("page_size = 4，页表：")
ctx = build_context(4, verbose=True)
shape = tuple(ctx.kv_cache.k_cache(0).shape)
print(f"KV 池：{ctx.kv_cache.num_pages} 页 × 4 个槽位，每层的 K 形状 {shape}，")
print(f"       {config.num_layers} 层的 K、V 一共 {format_bytes(ctx.kv_cache.num_bytes)}")
set_global_ctx(ctx)

# %% [markdown]
# ## 3. 一步前向
#
# 每一步都一样：把请求包成 `Batch`，`prepare_batch` 填好 `input_ids`、`positions`、`out_loc`，
# 后端的 `prepare_metadata` 算好每层共用的元数据，然后在 `ctx.forward_batch(batch)` 里调用注意力层。
# 参照答案是**稠密因果注意力**：把请求从头到尾的全部 token 一次算完，不分页、不缓存。
# 因果注意力里前面的 token 看不到后面的，所以它的每一行就是那个 token 在任何一步应得的输出。


# %%
def forward(
    reqs: list[Req], phase: Literal["prefill", "decode"]
) -> tuple[Batch, torch.Tensor, torch.Tensor]:
    ctx = get_global_ctx()
    batch = prepare_batch(Batch(reqs, phase), ctx.page_table)
    ctx.attn_backend.prepare_metadata(batch)
    qkv = torch.cat([QKV[NAMES[r.uid]][r.cached_len : r.device_len] for r in reqs])
    with ctx.forward_batch(batch):
        out = layer.forward(qkv)  # qkv 被原地改写：q、k 那几列变成了归一化、旋转之后的值
    return batch, out, qkv


def dense_reference(name: str) -> torch.Tensor:
    qkv = QKV[name].clone()
    q, k, v = qkv.split([H_Q * D, H_KV * D, H_KV * D], dim=-1)
    q, k = q_norm.forward(q.reshape(-1, H_Q, D)), k_norm.forward(k.reshape(-1, H_KV, D))
    layer.rotary.forward(torch.arange(LENGTHS[name], device=device), q, k)
    o = F.scaled_dot_product_attention(
        q.transpose(0, 1),
        k.transpose(0, 1),
        v.reshape(-1, H_KV, D).transpose(0, 1),
        is_causal=True,  # 没有前缀，从第 0 个 token 开始：左上对齐的因果掩码正好对
        enable_gqa=True,
    )
    return o.transpose(0, 1).reshape(LENGTHS[name], H_Q * D)


REF = {n: dense_reference(n) for n in NAMES}


def report(batch: Batch, out: torch.Tensor) -> float:
    """逐个请求和稠密参照比较，返回最大误差。"""
    worst = 0.0
    meta = batch.attn_metadata
    for i, r in enumerate(batch.reqs):
        start, end = meta.cu_seqlens_q[i].item(), meta.cu_seqlens_q[i + 1].item()
        diff = (out[start:end] - REF[NAMES[r.uid]][r.cached_len : r.device_len]).abs().max().item()
        worst = max(worst, diff)
        span = f"{r.cached_len}" if r.extend_len == 1 else f"{r.cached_len}..{r.device_len - 1}"
        print(f"  {NAMES[r.uid]}：位置 {span}，读 {r.device_len} 个 K/V，最大误差 {diff:.2e}")
    return worst


# %% [markdown]
# ### 第 0 步：B 的前缀
#
# 先让 B 的前 4 个 token 单独走一遍，它们的 K/V 就写进了 B 的页里。下一步 B 以 `cached_len=4`
# 进来，就像第 10 章的前缀缓存命中了这 4 个 token。

# %%
b_prefix = Req(TOKENS["B"][:4], table_idx=ROWS["B"], uid=1)
batch, out, _ = forward([b_prefix], "prefill")
print("positions:", batch.positions.tolist(), " out_loc:", batch.out_loc.tolist())
errors = [report(batch, out)]

# %% [markdown]
# ### 第 1 步：三个请求拼成一个 prefill 批次
#
# 新 token 首尾相接排成一维：A 的 6 个、B 的 3 个、C 的 2 个，一共 11 行，不补齐。
# `cu_seqlens` 记下每个请求从哪一行开始；`get_last_indices` 给出每个请求最后一个新 token 的行号，
# 第 5 章的 LM head 只对这几行算 logits。

# %%
reqs = [
    Req(TOKENS["A"][:6], table_idx=ROWS["A"], uid=0, output_len=1),
    Req(TOKENS["B"][:7], table_idx=ROWS["B"], cached_len=4, uid=1, output_len=1),
    Req(TOKENS["C"][:2], table_idx=ROWS["C"], uid=2, output_len=1),
]
batch, out, qkv = forward(reqs, "prefill")
meta = batch.attn_metadata
print(batch)
print("cu_seqlens:", meta.cu_seqlens_q.tolist())
print("positions: ", batch.positions.tolist())
print("out_loc:   ", batch.out_loc.tolist())
print("每个请求最后一个 token 的行号:", meta.get_last_indices(batch.size).tolist())
print("输出形状:", tuple(out.shape), "= (token 数, Q 头数 × head_dim)")
errors.append(report(batch, out))

# %% [markdown]
# B 的 3 个新 token 在位置 4、5、6，要看的 K/V 是位置 0～6：前 4 个来自第 0 步写进池子的前缀。
# 第 j 个新 token 能看到第 0～4+j 列，掩码是"右下对齐"的下三角。
# `scaled_dot_product_attention(is_causal=True)` 的掩码是左上对齐的：位置 4 的 token
# 只能看到第 0 列——把它用在有前缀的请求上，结果就错了。

# %%
mask = extend_causal_mask(4, 3)
top_left = torch.ones(3, 7, dtype=torch.bool).tril()
print("B 的掩码（右下对齐，对）    is_causal 的掩码（左上对齐，错）")
for right, wrong in zip(mask.int().tolist(), top_left.int().tolist()):
    print("   ", right, "   ", wrong)

q_b = qkv[6:9, : H_Q * D].reshape(3, H_Q, D)  # B 在一维排列里是第 6～8 行，已经归一化、旋转过
slots = ctx.page_table[ROWS["B"], :7].long()
k_b = ctx.kv_cache.k_cache(0).reshape(-1, H_KV, D)[slots]
v_b = ctx.kv_cache.v_cache(0).reshape(-1, H_KV, D)[slots]
for label, m in (("右下对齐", mask), ("左上对齐", top_left)):
    o = attention(q_b, k_b, v_b, m.to(device)).reshape(3, -1)
    print(f"  用{label}的掩码：最大误差 {(o - REF['B'][4:7]).abs().max().item():.2e}")

# %% [markdown]
# ### 第 2 步：decode 批次
#
# 每个请求采样出一个新 token（这里直接取事先生成好的），`append_host` 记到主机上，
# `complete_one` 把 `cached_len` 推到 `device_len`、`device_len` 加 1。
# 每个请求只有 1 个新 token，它能看到自己序列里的全部 K/V，不需要掩码。

# %%
for r in reqs:
    r.append_host(TOKENS[NAMES[r.uid]][r.device_len])
    r.complete_one()
batch, out, _ = forward(reqs, "decode")
print(batch)
print("positions:", batch.positions.tolist(), " out_loc:", batch.out_loc.tolist())
print("最后一个 token 的行号:", batch.attn_metadata.get_last_indices(batch.size).tolist())
errors.append(report(batch, out))
print("三步的误差都小于 1e-5:", max(errors) < 1e-5)

# %% [markdown]
# ## 4. 页大小不影响结果
#
# 换成 `page_size=1`（每个 token 一页，页表里的槽位完全打散），把三步重新走一遍。
# 页表和 KV 池里的布局都变了，但每个 token 读到的 K/V 没变，输出应当逐位相同。


# %%
def run_all_steps() -> list[torch.Tensor]:
    outs = [forward([Req(TOKENS["B"][:4], table_idx=ROWS["B"], uid=1)], "prefill")[1]]
    rs = [
        Req(TOKENS["A"][:6], table_idx=ROWS["A"], uid=0, output_len=1),
        Req(TOKENS["B"][:7], table_idx=ROWS["B"], cached_len=4, uid=1, output_len=1),
        Req(TOKENS["C"][:2], table_idx=ROWS["C"], uid=2, output_len=1),
    ]
    outs.append(forward(rs, "prefill")[1])
    for r in rs:
        r.append_host(TOKENS[NAMES[r.uid]][r.device_len])
        r.complete_one()
    outs.append(forward(rs, "decode")[1])
    return outs


results = {}
for page_size in (4, 1):
    reset_global_ctx()
    set_global_ctx(build_context(page_size))
    results[page_size] = run_all_steps()
    print(f"page_size={page_size}：B 那一行的槽位 {get_global_ctx().page_table[1, :8].tolist()}")
diff = max((a - b).abs().max().item() for a, b in zip(results[4], results[1]))
print(f"page_size=4 与 page_size=1 的输出：最大误差 {diff:.2e}")

# %% [markdown]
# ## 5. 同一时刻只有一个批次
#
# `forward_batch` 不允许嵌套：内层退出时会把外层的批次也清掉。嵌套失败时，外层的批次保持不变。

# %%
ctx = get_global_ctx()
outer = Batch([Req(TOKENS["C"][:2], table_idx=2)], "prefill")
with ctx.forward_batch(outer):
    try:
        with ctx.forward_batch(Batch([Req(TOKENS["A"][:3], table_idx=0)], "prefill")):
            pass
    except RuntimeError as e:
        print("嵌套的 forward_batch:", e)
    print("外层的批次还在:", ctx.batch is outer)
try:
    print(ctx.batch)
except RuntimeError as e:
    print("离开 with 之后:", e)
reset_global_ctx()
