# %% [markdown]
# # 第 18 章：Triton 分页注意力
#
# 原生后端（第 4 章）按请求循环：每个请求先把自己的 K/V 从池子里收集成连续的一块，再算注意力。
# 这一章的两个 Triton kernel 直接按页表去池子里读：prefill/extend 一个，decode（split-K）一个。
# main 先把 kernel 和一个稠密的参照比一比，再把整个引擎换成 `--attention-backend triton`，
# 和原生后端比生成的 token（float32 下逐个相同），在 GPU 上再比速度。
#
# 没有 GPU 时，同样的 kernel 由 Triton 的解释器在 CPU 上逐条执行：结果一样，只是慢，不比速度。
#
# 在仓库根目录运行：`python chapters/18-triton/main.py`。

# %%
from __future__ import annotations

import math
import os
import time

import torch

from minisgl.attention import TRITON_AVAILABLE
from minisgl.attention.triton_attn import (
    decode_attention,
    extend_attention,
    extend_tiles,
    extend_work,
)
from minisgl.core import SamplingParams
from minisgl.engine import has_weight_files
from minisgl.llm import LLM
from minisgl.utils import load_tokenizer, pick_device

MODEL = os.environ.get("MINISGL_MODEL", "models/demo-chat")
device = pick_device()
assert TRITON_AVAILABLE, "pip install triton（CUDA 版的 torch 自带）"
mode = "编译执行" if device.type == "cuda" else "解释执行（CPU）"
print(f"设备 {device}，Triton kernel {mode}")

# %% [markdown]
# ## 1. kernel 对参照
#
# 一个打乱了页的页表（页大小 4），一批 3 个请求：没有前缀的 prefill、带 100 个缓存 token 的 extend、
# 一个 decode。参照是逐请求的稠密注意力。

# %%
gen = torch.Generator().manual_seed(0)
hq, hkv, d, page_size, columns = 8, 2, 32, 4, 256
pages = torch.randperm(3 * columns // page_size, generator=gen)
table = (pages.view(3, -1)[:, :, None] * page_size + torch.arange(page_size)).flatten(1)
table = table.to(torch.int32)
k_pool = torch.randn(3 * columns, hkv, d, generator=gen)
v_pool = torch.randn(3 * columns, hkv, d, generator=gen)
cached, extend = [0, 100, 40], [50, 30, 1]
cu = [0, 50, 80, 81]
q = torch.randn(cu[-1], hq, d, generator=gen)


def dense(i: int) -> torch.Tensor:
    a, b, c = cu[i], cu[i + 1], cached[i]
    slots = table[i, : c + b - a].long()
    k = k_pool[slots].repeat_interleave(hq // hkv, 1)
    v = v_pool[slots].repeat_interleave(hq // hkv, 1)
    s = torch.einsum("thd,shd->hts", q[a:b], k) / math.sqrt(d)
    visible = torch.arange(c + b - a)[None, :] <= (c + torch.arange(b - a))[:, None]
    return torch.einsum("hts,shd->thd", s.masked_fill(~visible, float("-inf")).softmax(-1), v)


want = torch.cat([dense(i) for i in range(3)])


def on(*xs: torch.Tensor) -> list[torch.Tensor]:
    return [x.to(device) for x in xs]


rows = torch.tensor([0, 1, 2], dtype=torch.int32)
args = on(table, rows, torch.tensor(cu, dtype=torch.int32), torch.tensor(cached, dtype=torch.int32))
# 工作表：每个请求的每一块 q，要扫的 K/V 多的在前；块的大小和 kernel 用的一样
block_m = extend_tiles(device, q.dtype)["BLOCK_M"]
work = torch.tensor(extend_work(extend, cached, block_m), dtype=torch.int32).view(-1, 2)
out = extend_attention(*on(q, k_pool, v_pool), *args, *on(work)).cpu()
print(f"extend：最大误差 {(out - want).abs().max():.1e}")
lens = torch.tensor([c + e for c, e in zip(cached, extend)], dtype=torch.int32)
last = torch.tensor(cu[1:]) - 1  # 每个请求最后一个 token 的 q：当成 decode 再算一遍
out = decode_attention(*on(q[last], k_pool, v_pool, table, rows, lens)).cpu()
print(f"decode（split-K，8 段）：最大误差 {(out - want[last]).abs().max():.1e}")

# %% [markdown]
# ## 2. 整个引擎：两个后端，同样的回答
#
# 内嵌的演示对话模型（`models/demo-chat`），float32、贪心，问 4 个套了对话模板的问题。先单独问
# 第一个，再一起问后三个：第二个问题和第一个开头相同，它的 prefill 命中前缀缓存，走带前缀的
# extend。

# %%
questions = {
    "What is 1234 + 567?": "1234 + 567 = 1801",
    "What is 1234 + 5678?": "1234 + 5678 = 6912",
    "排序：42 7 19": "7 19 42",
    "倒过来：3 14 15 92": "92 15 14 3",
}
tokenizer = load_tokenizer(MODEL)
prompts = [  # 套好模板的文本；LLM.generate 把文本原样编码
    tokenizer.apply_chat_template(
        [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False
    )
    for q in questions
]
first, second = (tokenizer.encode(p) for p in prompts[:2])
shared = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)
print(f"第二个问题和第一个共享前 {shared} 个 token（共 {len(second)} 个）")
params = SamplingParams(max_tokens=32)
tokens = {}
for backend in ("torch", "triton"):
    llm = LLM(
        MODEL,
        device=device,
        dtype=torch.float32,
        attention_backend=backend,
        num_pages=4096,
        max_seq_len=1024,
        dummy_weights=not has_weight_files(MODEL),
    )
    outputs = llm.generate(prompts[:1], params) + llm.generate(prompts[1:], params)
    tokens[backend] = [o.token_ids for o in outputs]
    answers = [o.text for o in outputs]
    llm.shutdown()
print("两个后端生成的 token 相同:", tokens["torch"] == tokens["triton"])
for (question, expected), answer in zip(questions.items(), answers):
    print(f"  {question!r} → {answer!r}，应为 {expected!r}，对了: {answer == expected}")

# %% [markdown]
# ## 3. 速度（只在 GPU 上比）
#
# 64 个请求，提示 200～400 个 token，各生成 128 个；默认精度（CUDA 上 bfloat16）、CUDA Graph 打开。
# 原生后端 decode 时每个请求要读满页表的一整行（1024 列），Triton 后端只读到自己的长度为止。

# %%
if device.type == "cuda":
    import random

    rng = random.Random(0)
    work = [[rng.randrange(100, 5000) for _ in range(rng.randint(200, 400))] for _ in range(64)]
    params = SamplingParams(max_tokens=128, ignore_eos=True)
    speed = {}
    for backend in ("torch", "triton"):
        llm = LLM(
            MODEL,
            device=device,
            attention_backend=backend,
            num_pages=64 * 1024,
            max_running_reqs=64,
            max_seq_len=1024,
            dummy_weights=not has_weight_files(MODEL),
        )
        llm.generate(work[:4], SamplingParams(max_tokens=4))  # 预热：编译 kernel、捕获图
        torch.cuda.synchronize()
        t = time.perf_counter()
        llm.generate(work, params)
        torch.cuda.synchronize()
        speed[backend] = 64 * 128 / (time.perf_counter() - t)
        llm.shutdown()
    print(f"torch {speed['torch']:.0f} token/s，triton {speed['triton']:.0f} token/s，", end="")
    print(f"是原生后端的 {speed['triton'] / speed['torch']:.1f} 倍")
else:
    print("CPU 上是解释执行，不比速度")
