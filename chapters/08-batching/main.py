# %% [markdown]
# # 第 8 章：连续批处理
#
# 第 7 章的 `Engine` 一次只会算"给定的一批"。这一章写调度器：请求随时到来、随时结束，
# 每一步重新决定这一批里有谁——能接纳新请求就 prefill，否则让所有运行中的请求一起 decode。
# KV 页按需分配、接纳时预留，页不够时新请求排队等，谁也不会中途卡死。
#
# 在仓库根目录运行：`python chapters/08-batching/main.py`。默认用书里训练的演示对话模型
# `models/demo-chat`；换一个模型（没有权重时填随机数，回答就成了乱码）：
# `MINISGL_MODEL=models/qwen3-0.6b-shape python chapters/08-batching/main.py`。

# %%
from __future__ import annotations

import os
import time

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
tokenizer = load_tokenizer(MODEL)
print("设备:", device.type, " 模型:", MODEL, " 随机权重:", common["dummy_weights"])

# %% [markdown]
# ## 1. 离线生成一批提示
#
# `LLM` 在当前进程里建一个调度器，把所有提示放进等待队列，一步一步跑到全部结束。
# 八个不同的问题一起交进去：各自在采到停止符时结束，回答有长有短。
# 这个演示模型训练过这些题型，答错了就是引擎（调度、KV 页、批处理）出了错。

# %%
questions = {
    "What is 1234 + 567?": "1234 + 567 = 1801",
    "25 减 9000 等于多少？": "25 - 9000 = -(9000 - 25) = -8975",
    "Sort: 88 3 51 27 64": "3 27 51 64 88",
    "倒过来：3 14 15 92": "92 15 14 3",
    "Repeat after me: hello world": "You said: hello world",
    "跟我说：qzjx kwvb": "你说的是：qzjx kwvb",
    "8765 - 4321 等于多少？": "8765 - 4321 = 4444",
    "排序：42 7 19": "7 19 42",
}
# 套上对话模板（第 5 章）：对话模型只认训练时的格式
texts = [
    tokenizer.apply_chat_template(
        [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
    )
    for q in questions
]
llm = LLM(MODEL, page_size=4, num_pages=1024, max_running_reqs=16, max_seq_len=512, **common)
params = SamplingParams(max_tokens=48)
t0 = time.perf_counter()
outs = llm.generate(texts, params)
elapsed = time.perf_counter() - t0
n_tokens = sum(len(o.token_ids) for o in outs)
print(f"{len(texts)} 个请求，共生成 {n_tokens} 个 token，{n_tokens / elapsed:.1f} token/s")
print("步数:", llm.scheduler.stats)
for (question, want), o in zip(questions.items(), outs):
    mark = "对" if o.text == want else f"错，应为 {want!r}"
    print(f"  {question!r} → {o.text!r}（{len(o.token_ids)} 个 token，{o.finish_reason}，{mark}）")

# %% [markdown]
# ## 2. 一起跑 == 一个一个跑
#
# 批处理只是把几个请求的 token 排在一起算，每个请求的结果不应该因为"和谁一起"而改变。

# %%
prompts = [o.prompt_ids for o in outs]
together = [o.token_ids for o in llm.generate(prompts, params)]
alone = [llm.generate([p], params)[0].token_ids for p in prompts]
print("批处理 == 逐个运行:", together == alone)
llm.shutdown()

# %% [markdown]
# ## 3. 一步一步看：请求随时加入、随时离开
#
# 直接驱动调度器：先来两个请求，第 3 步之后再来两个。每一步打印这一批是谁。

# %%
llm = LLM(MODEL, page_size=4, num_pages=64, max_running_reqs=4, max_seq_len=128, **common)
sched = llm.scheduler


def submit(uid: int, n_prompt: int, max_tokens: int) -> None:
    ids = torch.arange(100 + uid, 100 + uid + n_prompt, dtype=torch.int32)
    sched.add_request(PendingReq(uid, ids, SamplingParams(max_tokens=max_tokens, ignore_eos=True)))


submit(0, 6, 4)
submit(1, 3, 6)
step = 0
while sched.has_work:
    step += 1
    if step == 4:
        submit(2, 5, 3)
        submit(3, 2, 2)
    batch = sched.schedule_next_batch()
    assert batch is not None
    uids, n_new = [r.uid for r in batch.reqs], batch.num_tokens
    outputs = sched.process(sched.forward(batch))
    done = [o.uid for o in outputs if o.finished]
    print(
        f"第 {step} 步 {batch.phase:7s} 请求 {uids}  新 token {n_new:2d}  结束 {done}"
        f"  可用页 {sched.cache.available_pages}"
    )
    sched.check_integrity()
llm.shutdown()

# %% [markdown]
# ## 4. KV 页不够：新请求排队，最后全部完成
#
# 24 页 × 4 个 token 只够 96 个 token。每个请求提示 10 个、生成 20 个，要 8 页：同时最多跑 3 个。
# 接纳时按"生成到头要的页"预留，所以 decode 永远不会半路没页。

# %%
llm = LLM(MODEL, page_size=4, num_pages=24, max_running_reqs=8, max_seq_len=128, **common)
sched = llm.scheduler
for uid in range(6):
    submit(uid, 10, 20)
most, generated = 0, {uid: 0 for uid in range(6)}
while sched.has_work:
    for out in sched.step():
        generated[out.uid] += 1
    most = max(most, len(sched.decode_manager))
    sched.check_integrity()
print(f"同时运行最多 {most} 个；每个请求生成的 token 数 {generated}")
print(f"结束后可用页 {sched.cache.available_pages}/24，等待队列 {len(sched.prefill_manager)}")
llm.shutdown()

# %% [markdown]
# ## 5. 停止符与坏输入
#
# 采到停止符就结束（`finish_reason="stop"`），`ignore_eos=True` 时一直生成到 `max_tokens`。
# 不合法的请求立刻得到一个带说明的错误结果——不会被悄悄丢掉，调用方也不会一直等下去。

# %%
probe = LLM(MODEL, num_pages=256, max_seq_len=64, **common)
first = probe.generate([prompts[0]], SamplingParams(max_tokens=8, ignore_eos=True))[0].token_ids
probe.shutdown()
stop_at = first[2]  # 把贪心的第 3 个 token 当作停止符
llm = LLM(MODEL, num_pages=256, max_seq_len=64, eos_token_ids=(stop_at,), **common)
for ignore in (False, True):
    o = llm.generate([prompts[0]], SamplingParams(max_tokens=8, ignore_eos=ignore))[0]
    print(f"ignore_eos={ignore}: {len(o.token_ids)} 个 token，finish_reason={o.finish_reason}")
bad = llm.generate(
    [list(range(1, 100)), [], prompts[0]],
    [SamplingParams(), SamplingParams(), SamplingParams(max_tokens=0)],
)
for o in bad:
    print(f"  uid {o.uid}: {o.finish_reason} — {o.error}")
llm.shutdown()
