# %% [markdown]
# # 第 5 章：组装模型——Llama / Qwen3 与第一次贪心生成
#
# 前四章备齐了零件：配置和流式加载的权重（第 2 章）、线性层 / RMSNorm / RoPE 这些算子
# （第 3 章）、分页的 KV 池和注意力（第 4 章）。这一章把它们拼成一个真正的语言模型，
# 让它说出第一句话：
#
# - 在 meta 设备上按 config.json 建出模型结构，再把权重流式读进来；
# - 用聊天模板把一个问题变成 token，prefill 一次、再一个一个 token 地 decode；
# - 和 Hugging Face transformers 逐步对照：logits 的最大误差、生成的 token 是否相同。
#
# 在仓库根目录运行：`python chapters/05-model/main.py`。默认用内嵌的演示模型 `models/demo-chat`，
# 几秒钟跑完。它是为这本书专门训练的小聊天模型（Qwen3 结构、真实的 Qwen 词表和聊天模板）：
# 会算加减法、给数字排序、把数字倒过来、复述你说的话，别的问题一律客气地拒绝。它的答案可以
# 一眼核对——答错了就说明引擎有 bug。有 GPU 和网络时可以换成真模型：
# `python chapters/05-model/main.py --model Qwen/Qwen3-0.6B`。

# %%
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from minisgl.attention import create_attention_backend, page_slots, prepare_batch
from minisgl.core import Batch, Context, Req, get_global_ctx, reset_global_ctx, set_global_ctx
from minisgl.kvcache import create_kvcache_pool
from minisgl.models import MODELS, ModelConfig, create_model, load_model
from minisgl.models.utils import greedy_generate
from minisgl.utils import (
    div_ceil,
    dtype_from_str,
    format_bytes,
    load_tokenizer,
    pick_device,
    resolve_model_path,
)

parser = argparse.ArgumentParser(description="第 5 章：组装模型与第一次贪心生成")
parser.add_argument("--model", default="models/demo-chat", help="本地文件夹或 Hub 上的名字")
parser.add_argument("--dtype", default="float32", help="float32 / bfloat16 / float16")
parser.add_argument("--max-new-tokens", type=int, default=32)
parser.add_argument("--page-size", type=int, default=4)
parser.add_argument("--prompt", default="用一句话介绍一下你自己。")
# 在 notebook 里 sys.argv 带着内核自己的参数：只取认识的，其余忽略
args, _ = parser.parse_known_args()

device = pick_device()
dtype = dtype_from_str(args.dtype)
path = resolve_model_path(args.model)
config = ModelConfig.from_pretrained(path)
print(f"模型 {args.model}（{config.architecture}），设备 {device.type}，精度 {args.dtype}")

# %% [markdown]
# ## 1. 按 config.json 建出模型结构
#
# `create_model` 按 `architectures[0]` 在登记表里找到模型类。结构建在 meta 设备上：
# 每个权重都只是一个有形状、有 dtype、没有存储的占位张量，几十亿参数的模型也是瞬间建好、
# 一个字节都不占。状态字典的名字和第 2 章加载器交出的名字一一对应。

# %%
print("登记的模型结构:", MODELS.names())
with torch.device("meta"):
    skeleton = create_model(config)
names = skeleton.state_dict()
print(f"{len(names)} 个权重，{sum(t.numel() for t in names.values()):,} 个参数，第 0 层的是：")
for name, t in names.items():
    if name.startswith("model.layers.0."):
        print(f"  {name.removeprefix('model.layers.0.'):36s} {tuple(t.shape)}")
print("其余:", [n for n in names if not n.startswith("model.layers.")])
print("占位张量在:", names["model.norm.weight"].device)
print("lm_head 有自己的权重吗:", "lm_head.weight" in names, "（共用词嵌入时没有）")

try:
    create_model(dataclasses.replace(config, architecture="GPT2LMHeadModel"))
except ValueError as e:
    print("不认识的结构:", e)

# %% [markdown]
# ## 2. 加载权重
#
# `load_model` 做三件事：在 meta 上建结构；用第 2 章的 `load_weights` 一个一个地读、合并、
# 切分，直接放到目标设备上；最后交给第 3 章的严格加载，把占位张量整个换掉。

# %%
start = time.perf_counter()
model = load_model(path, device=device, dtype=dtype)
elapsed = time.perf_counter() - start
weights = model.state_dict()
nbytes = sum(t.nbytes for t in weights.values())
print(f"加载 {len(weights)} 个权重（{format_bytes(nbytes)}）用时 {elapsed:.2f} s")
print("权重在:", model.model.norm.weight.device, model.model.norm.weight.dtype)
print(
    "lm_head 用的就是 embed_tokens 的那个张量:",
    model.lm_head.local_weight is model.model.embed_tokens.weight,
)

# %% [markdown]
# ## 3. 聊天模板 → token
#
# 聊天模型要按训练时的格式说话：`apply_chat_template` 把消息包成
# `<|im_start|>user ... <|im_end|>` 的样子，最后留一个 assistant 的开头让模型接着写。
# 模型说完一句话会写出 `<|im_end|>`（分词器的 eos），生成到它就停。


# %%
def chat_ids(question: str) -> list[int]:
    """一个用户问题 → 聊天模板展开之后的 token。"""
    messages = [{"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


tokenizer = load_tokenizer(path)
prompt_ids = chat_ids(args.prompt)
text = tokenizer.decode(prompt_ids)
stop_ids = {tokenizer.eos_token_id}
print("模板展开之后:", repr(text))
print(f"{len(prompt_ids)} 个 token:", prompt_ids)

# %% [markdown]
# ## 4. 手工走一步：prefill
#
# 生成循环的每一步都一样：分配页、填页表，`prepare_batch` 把请求排成一维，后端准备元数据，
# 然后在 `forward_batch` 里调用不带参数的 `model.forward()`。prefill 把整段提示送进去，
# 但 LM head 只对最后一个 token 算 logits：返回的是 `(请求数, 词表大小)`，不是每个 token 一行。


# %%
def new_context(page_size: int, num_tokens: int, rows: int = 2) -> Context:
    """手工建上下文：KV 池、页表、注意力后端（第 7 章的 Engine 会替我们做）。"""
    num_pages = rows * div_ceil(num_tokens, page_size)
    kv_cache = create_kvcache_pool(config, num_pages, page_size, dtype, device)
    page_table = torch.zeros(rows, num_tokens, dtype=torch.int32, device=device)
    backend = create_attention_backend("torch", config, kv_cache, page_table)
    ctx = Context(page_table=page_table, kv_cache=kv_cache, attn_backend=backend)
    reset_global_ctx()
    set_global_ctx(ctx)
    return ctx


max_len = len(prompt_ids) + args.max_new_tokens + 16
ctx = new_context(args.page_size, max_len)
pool = ctx.kv_cache
print(f"KV 池：{pool.num_pages} 页 × {pool.page_size} 个槽位，{format_bytes(pool.num_bytes)}")

req = Req(torch.tensor(prompt_ids, dtype=torch.int32), table_idx=0)
pages = range(div_ceil(len(prompt_ids), args.page_size))  # 这一个请求独占池子：从第 0 页起按顺序取
ctx.page_table[0, : len(prompt_ids)] = page_slots(pages, args.page_size, len(prompt_ids)).to(device)
batch = prepare_batch(Batch([req], "prefill"), ctx.page_table)
ctx.attn_backend.prepare_metadata(batch)
with ctx.forward_batch(batch):
    logits = model.forward()
print(f"送进 {batch.num_tokens} 个 token，logits 的形状 {tuple(logits.shape)}")
top = logits[0].float().topk(5)
for value, token in zip(top.values.tolist(), top.indices.tolist()):
    print(f"  {token:>6d} {tokenizer.decode([token])!r:12s} logit {value:8.3f}")

# %% [markdown]
# ## 5. 贪心生成
#
# `greedy_generate` 把上面这一步放进循环：第一步 prefill，之后每步把刚选出的 token 作为
# 唯一的新 token 送进去（decode），它的 K/V 写进池子，前面的 K/V 直接从池子里读。
# 每步取 logits 最大的那个 token，直到生成够数或遇到结束符。

# %%
ctx = new_context(args.page_size, max_len)
out = greedy_generate(model, [prompt_ids], args.max_new_tokens, stop_token_ids=stop_ids)
tokens = out.token_ids[0]
print(f"生成 {len(tokens)} 个 token:", tokens)
print("问:", args.prompt)
print("答:", tokenizer.decode(tokens, skip_special_tokens=True))
prefill_s, decode_s = out.step_seconds[0], sum(out.step_seconds[1:])
print(f"prefill：{len(prompt_ids)} 个 token，用时 {prefill_s * 1e3:.1f} ms")
if len(tokens) > 1:
    speed = (len(tokens) - 1) / decode_s
    print(f"decode：{len(tokens) - 1} 步，用时 {decode_s:.2f} s，速度 {speed:.1f} token/s")

# %% [markdown]
# 再问几个答案可以核对的问题。演示模型只会这几样，标准答案是确定的：
# 引擎里哪怕错一个位置的 K/V、一个 RoPE 的角度，答案也会错。

# %%
QUESTIONS = [
    ("What is 1234 + 567?", "1234 + 567 = 1801"),
    ("25 减 9000 等于多少？", "25 - 9000 = -(9000 - 25) = -8975"),
    ("排序：42 7 19", "7 19 42"),
    ("Reverse: 3 14 15 92", "92 15 14 3"),
    ("跟我说：qzjx kwvb", "你说的是：qzjx kwvb"),
]
demo = Path(path).name == "demo-chat"  # 标准答案只对演示模型成立；换了模型就只看它怎么答
for question, expected in QUESTIONS:
    question_ids = chat_ids(question)
    ctx = new_context(args.page_size, len(question_ids) + 48)
    answer_ids = greedy_generate(model, [question_ids], 48, stop_token_ids=stop_ids)
    answer = tokenizer.decode(answer_ids.token_ids[0], skip_special_tokens=True)
    check = f"（标准答案：{expected}，{'对' if answer == expected else '错'}）" if demo else ""
    print(f"问：{question}\n  答：{answer}{check}")

# %% [markdown]
# ## 6. 和 transformers 对照
#
# 参照答案是 transformers 的同一个模型：每一步把"提示 + 已经生成的 token"整段送进去
# （不用任何缓存），取最后一个位置的 logits。逐步比较 logits 的最大误差和选出的 token。
#
# 小模型（尤其是随机权重的）偶尔会有两个 token 的 logit 几乎一样大（near-tie）：两边各有
# 1e-5 量级的浮点误差，谁排第一都说得过去。所以只在 HF 的第一名比第二名大出 1e-3 以上时比较
# token；遇到 near-tie 就停下来，之后两边的序列可能已经合理地分岔了。


# %%
@torch.no_grad()
def hf_greedy(
    hf_model: torch.nn.Module, prompt: list[int], n: int
) -> tuple[list[int], torch.Tensor]:
    ids = torch.tensor([prompt], device=device)
    steps = []
    for _ in range(n):
        step = hf_model(ids).logits[0, -1].float()
        steps.append(step)
        token = int(step.argmax())
        ids = torch.cat([ids, torch.tensor([[token]], device=device)], dim=1)
        if token in stop_ids:
            break
    return ids[0, len(prompt) :].tolist(), torch.stack(steps)


hf_model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
hf_tokens, hf_logits = hf_greedy(hf_model, prompt_ids, args.max_new_tokens)
ctx = new_context(args.page_size, max_len)
ours = greedy_generate(
    model, [prompt_ids], args.max_new_tokens, stop_token_ids=stop_ids, keep_logits=True
)
compared, worst, min_margin = 0, 0.0, float("inf")
for k in range(min(len(hf_tokens), len(ours.token_ids[0]))):
    top2 = hf_logits[k].topk(2).values
    margin = (top2[0] - top2[1]).item()
    worst = max(worst, (ours.logits[0][k].float() - hf_logits[k].cpu()).abs().max().item())
    if margin <= 1e-3:
        print(f"第 {k} 步 HF 的前两名只差 {margin:.1e}：near-tie，到此为止")
        break
    min_margin = min(min_margin, margin)
    if ours.token_ids[0][k] != hf_tokens[k]:
        print(f"第 {k} 步不同：我们 {ours.token_ids[0][k]}，HF {hf_tokens[k]}")
        break
    compared += 1
print(f"逐步比较了 {compared} 个 token，全部相同: {compared == len(hf_tokens)}")
print(f"HF 每一步第一名领先第二名至少 {min_margin:.3f}")
print(f"logits 的最大误差 |Δlogit| = {worst:.1e}，小于 1e-3: {worst < 1e-3}")

# %% [markdown]
# ## 7. 页大小、批次都不改变结果
#
# 同一段提示，页大小换成 1（每个 token 一页）；再和另一个长度不同的问题拼成一个批次，
# 一起 prefill、一起 decode。KV 在池子里的位置全变了，每个请求读到的 K/V 没变，
# 生成的 token 应当完全相同。

# %%
other = chat_ids("Sort: 42 7 19")
n = 8
ctx = new_context(1, max_len)
alone = greedy_generate(model, [prompt_ids], n).token_ids[0]
print(f"page_size=1 的前 {n} 个 token 和 page_size={args.page_size} 相同:", alone == tokens[:n])
ctx = new_context(1, max_len)
other_alone = greedy_generate(model, [other], n).token_ids[0]
ctx = new_context(args.page_size, max_len)
both = greedy_generate(model, [prompt_ids, other], n).token_ids
print(f"两段提示（{len(prompt_ids)} 和 {len(other)} 个 token）拼成一批:", both)
print("和各自单独生成的相同:", both == [alone, other_alone])
print("拼成一批时第二个问题的答案:", repr(tokenizer.decode(both[1], skip_special_tokens=True)))
print("生成之后页表第 1 行的前 8 个槽位:", get_global_ctx().page_table[1, :8].tolist())
reset_global_ctx()
