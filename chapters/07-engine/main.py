# %% [markdown]
# # 第 7 章：Engine——内存预算、采样与 CUDA Graph
#
# 前 6 章每次生成都要手工搭上下文：开多大的 KV 池、页表几行几列、用哪个注意力后端。
# 这一章把它们收进一个 `Engine`：给它一个 `EngineConfig`，它加载模型、按内存预算算出
# KV 池的页数、建好页表和后端、准备采样器，在 CUDA 上还把 decode 录成 CUDA Graph。
# 之后它只做一件事：`forward_batch(batch)` → 每个请求的下一个 token。
#
# 在仓库根目录运行：`python chapters/07-engine/main.py`。默认用书里训练的演示对话模型
# `models/demo-chat`（会做加减法、排序、倒序和复述），它答对了，说明 Engine 算得对。
# 换一个模型（没有权重时填随机数，回答就成了乱码）：
# `MINISGL_MODEL=models/qwen3-0.6b-shape python chapters/07-engine/main.py`。

# %%
from __future__ import annotations

import os
import time
from dataclasses import replace

import torch

from minisgl.core import SamplingParams
from minisgl.engine import (
    Engine,
    EngineConfig,
    has_weight_files,
    kv_bytes_per_page,
    padded_batch_size,
    plan_num_pages,
    static_generate,
)
from minisgl.models import ModelConfig, generate_in_new_context
from minisgl.utils import format_bytes, load_tokenizer, pick_device

MODEL = os.environ.get("MINISGL_MODEL", "models/demo-chat")  # 没有权重文件时填随机数
device = pick_device()
tokenizer = load_tokenizer(MODEL)
# 三个问题和训练好的模型应该给出的回答
questions = {
    "What is 1234 + 567?": "1234 + 567 = 1801",
    "排序：42 7 19": "7 19 42",
    "Repeat after me: qzjx kwvb": "You said: qzjx kwvb",
}


def chat_prompt(question: str) -> list[int]:
    """套上对话模板（第 5 章）再编码：对话模型只认训练时的格式。"""
    messages = [{"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


def answer(ids: list[int]) -> str:
    """生成的 token → 文字，截到第一个停止符（static_generate 不看停止符，会一直生成下去）。"""
    stop = ids.index(tokenizer.eos_token_id) if tokenizer.eos_token_id in ids else len(ids)
    return tokenizer.decode(ids[:stop])


prompts = [chat_prompt(q) for q in questions]
print("设备:", device.type, " 模型:", MODEL, " 提示长度:", [len(p) for p in prompts])

# %% [markdown]
# ## 1. KV 池开多大
#
# 一页 KV 的字节数 = 2（K 和 V）× 层数 × 页内 token 数 × KV 头数 × head_dim × 每个数的字节数。
# 先拿 Qwen3-0.6B 的形状在一张 80 GiB 的卡上算一遍：加载模型后还空闲 78 GiB，
# `memory_fraction=0.9` 留出 8 GiB 给激活和 CUDA Graph，剩下的都是 KV 池。

# %%
GiB = 1 << 30
shape = ModelConfig.from_pretrained("models/qwen3-0.6b-shape")
per_token = kv_bytes_per_page(
    shape.num_layers, shape.num_kv_heads, shape.head_dim, 1, torch.bfloat16
)
plan = plan_num_pages(free=78 * GiB, total=80 * GiB, bytes_per_page=per_token, memory_fraction=0.9)
print(
    f"Qwen3-0.6B：每个 token 的 KV {format_bytes(per_token)}，"
    f"KV 池 {format_bytes(plan.available)} → {plan.num_pages} 个 token"
)

# %% [markdown]
# 真的建一个 Engine。页表 8 行 × 256 列，最多用得到 8 × 256 个槽位：空闲内存再多，
# 多开的页也用不上，所以页数被页表截断（`capped=True`）。

# %%
config = EngineConfig(
    MODEL,
    device=device,
    dtype=torch.float32,
    page_size=4,
    max_running_reqs=8,
    max_seq_len=256,
    dummy_weights=not has_weight_files(MODEL),
)
engine = Engine(config)
p = engine.memory_plan
print(
    f"权重 {format_bytes(engine.model_bytes)}；KV 池 {engine.num_pages} 页 × {engine.page_size} "
    f"token（{format_bytes(p.kv_bytes)}，依据 {p.source}，截断 {p.capped}），外加 1 页哑页"
)
print("CUDA Graph:", engine.graph_runner.describe())

# %% [markdown]
# ## 2. 贪心：和第 5 章的生成循环逐个相同
#
# `static_generate` 是本章的临时生成循环：页一次分好，每步调用 `engine.forward_batch`。
# 第 5 章的 `greedy_generate` 是参照答案。

# 生成 20 个 token，够三个回答加上停止符。

# %%
got = static_generate(engine, prompts, 20)
engine.shutdown()
expected = generate_in_new_context(engine.model, prompts, 20).token_ids
for (question, want), ids in zip(questions.items(), got):
    print(f"{question!r} → {answer(ids)!r}（应为 {want!r}）")
print("回答全对:", [answer(ids) for ids in got] == list(questions.values()))
print("和 greedy_generate 相同:", got == expected)

# %% [markdown]
# ## 3. 一批里各用各的采样参数
#
# 第 1 个请求贪心，第 2 个 top-k=20、温度 1.0，第 3 个 top-p=0.9、温度 0.8。
# 同一个种子跑两遍结果相同；换个种子，只有采样的请求会变。训练好的模型对答案很有把握，
# 采样也抽到同样的回答；变化出现在停止符之后——那里的分布是平的（`static_generate` 不看停止符）。

# %%
params = [
    SamplingParams(),
    SamplingParams(temperature=1.0, top_k=20),
    SamplingParams(temperature=0.8, top_p=0.9),
]
runs = {}
for seed in (0, 0, 1):
    engine = Engine(replace(config, seed=seed))
    runs.setdefault(seed, []).append(static_generate(engine, prompts, 20, params))
    engine.shutdown()
print("种子 1 的回答:", [answer(ids) for ids in runs[1][0]])
print("种子 0 两次相同:", runs[0][0] == runs[0][1])
print("贪心的请求不受种子影响:", runs[0][0][0] == runs[1][0][0] == expected[0])
print("采样的请求随种子变化:", runs[0][0][1:] != runs[1][0][1:])

# %% [markdown]
# ## 4. CUDA Graph：补齐到最近的一档
#
# decode 的批大小向上补齐到 `cuda_graph_batch_sizes` 里最近的一档；超过最大一档就即时执行。
# 只有 CUDA 上才真的录图；别的设备上 GraphRunner 关闭，每步即时执行。

# %%
sizes = list(config.cuda_graph_batch_sizes)
print("档位:", sizes)
print("批大小 → 补齐后:", {bs: padded_batch_size(bs, sizes) for bs in (1, 3, 5, 9, 17, 33)})

if engine.graph_runner.enabled or device.type == "cuda":
    timings = {}
    for use_graph in (False, True):
        engine = Engine(replace(config, use_cuda_graph=use_graph))
        static_generate(engine, prompts, 4)  # 预热
        start = time.perf_counter()
        out = static_generate(engine, prompts, 64)
        timings[use_graph] = (time.perf_counter() - start, out)
        engine.shutdown()
    print("图重放和即时执行生成相同:", timings[True][1] == timings[False][1])
    for use_graph, (seconds, _) in timings.items():
        print(f"{'CUDA Graph' if use_graph else '即时执行'}：{3 * 64 / seconds:.0f} token/s")
else:
    print("这台机器没有 CUDA：GraphRunner 关闭，decode 每步即时执行")
