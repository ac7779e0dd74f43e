# %% [markdown]
# # 第 9 章：分块预填充
#
# 第 8 章里，一个很长的提示只能一口气 prefill：第一个请求不受 token 预算限制，一步就要算完
# 几千个 token，激活的显存和这一步的时间都跟着提示一起涨。这一章把长提示切成块：每一步最多
# 算 `max_extend_tokens` 个新 token，预算由这一批的请求共用；没算完的请求留在队头，下一步
# 接着算，算完最后一块才第一次采样。
#
# 在仓库根目录运行：`python chapters/09-chunked/main.py`。默认用书里训练的演示对话模型
# `models/demo-chat`：分块切错了地方，它的回答就会错。

# %%
from __future__ import annotations

import os

import torch

from minisgl.core import SamplingParams
from minisgl.engine import has_weight_files
from minisgl.llm import LLM
from minisgl.scheduler import PendingReq
from minisgl.utils import load_tokenizer, pick_device

MODEL = os.environ.get("MINISGL_MODEL", "models/demo-chat")
device = pick_device()
# float32：不同批次组合下的输出可以逐个 token 比较（bf16 的舍入会随批大小变化）
common = dict(device=device, dtype=torch.float32, dummy_weights=not has_weight_files(MODEL))
print("设备:", device.type, " 模型:", MODEL)

# %% [markdown]
# ## 1. 一步一步看：三个请求共用 32 个 token 的预算
#
# 提示长 20、30、40。每一步打印这一批里每个请求算的是提示的哪一段 `[起, 止)`。

# %%
llm = LLM(MODEL, num_pages=512, max_running_reqs=8, max_seq_len=256, max_extend_tokens=32, **common)
sched = llm.scheduler
for uid, n in enumerate([20, 30, 40]):
    ids = torch.arange(1000 + 100 * uid, 1000 + 100 * uid + n, dtype=torch.int32)
    sched.add_request(PendingReq(uid, ids, SamplingParams(max_tokens=3, ignore_eos=True)))
step = 0
while sched.has_work:
    step += 1
    batch = sched.schedule_next_batch()
    assert batch is not None
    parts = [f"{r.uid}:[{r.cached_len},{r.device_len})" for r in batch.reqs]
    n_new = batch.num_tokens
    outputs = sched.process(sched.forward(batch))
    sampled = [o.uid for o in outputs]
    print(
        f"第 {step} 步 {batch.phase:7s} {n_new:2d} 个新 token  {' '.join(parts):30s} 采样 {sampled}"
    )
    sched.check_integrity()
llm.shutdown()

# %% [markdown]
# 第 1 步：请求 0 整个放进去（20 个），剩下 12 个预算给请求 1 的前 12 个 token；请求 1 没算完，
# 它这一行采样出的 token 被丢掉。第 2 步：请求 1 接着算剩下的 18 个，再给请求 2 开个头……
# 每一步的新 token 都不超过 32。

# %% [markdown]
# ## 2. 块的大小不改变结果
#
# 四个对话问题（套上对话模板），预算 1、7、64 和不分块（8192），生成的 token 完全相同，
# 回答也都对；只是 prefill 的步数不同。预算 1 时每一步只算提示的一个 token。

# %%
questions = {
    "What is 4096 + 2048?": "4096 + 2048 = 6144",
    "25 减 9000 等于多少？": "25 - 9000 = -(9000 - 25) = -8975",
    "Sort: 88 3 51 27 64": "3 27 51 64 88",
    "Reverse: 5 8 13 21 34": "34 21 13 8 5",
}
tokenizer = load_tokenizer(MODEL)
texts = [
    tokenizer.apply_chat_template(
        [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
    )
    for q in questions
]
params = SamplingParams(max_tokens=32)
results, answers = {}, {}
for budget in (8192, 64, 7, 1):
    llm = LLM(
        MODEL, num_pages=1024, max_seq_len=256, page_size=4, max_extend_tokens=budget, **common
    )
    outs = llm.generate(texts, params)
    results[budget] = [o.token_ids for o in outs]
    answers[budget] = [o.text for o in outs]
    s = llm.scheduler.stats
    print(
        f"预算 {budget:5d}：prefill {s['prefill_steps']:3d} 步"
        f"（共 {s['prefill_tokens']} 个 token），decode {s['decode_steps']} 步"
    )
    llm.shutdown()
print("四种预算的输出相同:", all(r == results[8192] for r in results.values()))
for (question, want), got in zip(questions.items(), answers[1]):
    print(f"  预算 1：{question!r} → {got!r}（{'对' if got == want else f'错，应为 {want!r}'}）")
