# %% [markdown]
# # 第 11 章：重叠调度与中止
#
# 到第 10 章为止，调度循环每一步都要等：发出前向 → 等 GPU 算完、token 拷回主机 → 处理结果 →
# 再准备下一步。GPU 在主机处理结果、组下一批的时候是空着的。重叠调度把这段空闲填上：先发出
# 第 N+1 步，再处理第 N 步的结果。代价是结果晚一步知道——一个在第 N 步就该停下的请求，第 N+1
# 步已经被算了一次，那个 token 要丢掉，它占的行和页也只能释放一次。这一章顺带写中止：请求在
# 排队、分块、运行、正在前向时都可能被中止，每种情况都要恰好释放一次。
#
# 在仓库根目录运行：`python chapters/11-overlap/main.py`。服务里关掉重叠调度用环境变量
# `MINISGL_DISABLE_OVERLAP_SCHEDULING=1`；这个 main 要把两种都跑一遍，直接设 `scheduler.overlap`。

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
print("设备:", device.type, " 模型:", MODEL)


def make_llm(overlap: bool, **kw: object) -> LLM:
    config = dict(num_pages=2048, page_size=4, max_running_reqs=32, max_seq_len=512)
    config.update(kw)
    llm = LLM(MODEL, **config, **common)
    llm.scheduler.overlap = overlap  # 等价于设置 MINISGL_DISABLE_OVERLAP_SCHEDULING
    return llm


# %% [markdown]
# ## 1. 结果晚一步：一步一步看
#
# 两个请求，请求 0 生成 2 个 token，请求 1 生成 4 个。每一步打印"这一步发出了谁"和
# "这一步处理了谁的结果"。

# %%
llm = make_llm(overlap=True)
sched = llm.scheduler
for uid, (n, m) in enumerate([(5, 2), (3, 4)]):
    ids = torch.arange(100 * (uid + 1), 100 * (uid + 1) + n, dtype=torch.int32)
    sched.add_request(PendingReq(uid, ids, SamplingParams(max_tokens=m, ignore_eos=True)))
step = 0
while sched.has_work:
    step += 1
    outputs = sched.step()
    launched = sched.in_flight
    sent = f"{launched.batch.phase:7s} {[r.uid for r in launched.batch.reqs]}" if launched else "-"
    got = [(o.uid, "结束" if o.finished else "") for o in outputs]
    print(f"第 {step} 步  发出 {sent:18s} 处理结果 {got}")
    sched.check_integrity()
llm.shutdown()

# %% [markdown]
# 第 1 步只发出 prefill，还没有结果可处理；之后每一步处理的都是上一步发出的那一批。请求 0 的
# 第 2 个 token 在第 2 步发出——发出时就知道够数了，它不再进 decode 集合，第 3 步只发出请求 1；
# 第 3 步处理第 2 步的结果时，请求 0 结束。

# %% [markdown]
# ## 2. 重叠与不重叠，输出相同
#
# 16 个问题交给演示模型（`models/demo-chat`），每个都套上对话模板。回答有长有短，各自在
# 停止符 `<|im_end|>` 处结束：重叠调度下，每个请求在结束之后都会被多算一步，那一步的 token 丢掉。

# %%
tokenizer = load_tokenizer(MODEL)


def chat(question: str) -> list[int]:
    """一个问题套上对话模板（第 13 章的 tokenizer 进程也是这样做的）。"""
    messages = [{"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


# 问题 → 期望的回答（None：不逐字核对的长回答）
questions = {
    "What is 1234 + 567?": "1234 + 567 = 1801",
    "Sort: 42 7 19": "7 19 42",
    "Reverse: 3 14 15 92": "92 15 14 3",
    "Repeat after me: qzjx kwvb": "You said: qzjx kwvb",
    "25 减 9000 等于多少？": "25 - 9000 = -(9000 - 25) = -8975",
    "你好": None,
    "排序：88 3 51 27": "3 27 51 88",
    "倒过来：5 8 13 21": "21 13 8 5",
    "What is 4321 - 987?": "4321 - 987 = 3334",
    "跟我说：blorp zindle": "你说的是：blorp zindle",
    "Who are you?": None,
    "What is 2024 + 1999?": "2024 + 1999 = 4023",
    "8765 减 4321 等于多少？": "8765 - 4321 = 4444",
    "Sort: 56 12 89 3": "3 12 56 89",
    "Hello": None,
    "What is the capital of France?": None,
}
prompts = [chat(q) for q in questions]
params = SamplingParams(max_tokens=48)
results, speed = {}, {}
for overlap in (False, True):
    llm = make_llm(overlap)
    llm.generate(prompts[:2], SamplingParams(max_tokens=2))  # 预热
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params)
    elapsed = time.perf_counter() - t0
    results[overlap] = [(o.token_ids, o.finish_reason) for o in outs]
    n = sum(len(o.token_ids) for o in outs)
    speed[overlap] = n / elapsed
    print(f"重叠={overlap!s:5s}：{n} 个 token，{speed[overlap]:.1f} token/s，", end="")
    print(f"步数 {llm.scheduler.stats}")
    llm.shutdown()
print("输出相同:", results[True] == results[False])
print("因停止符结束的请求:", sum(r == "stop" for _, r in results[True]))
print(f"重叠 / 不重叠 = {speed[True] / speed[False]:.2f} 倍")
answers = [tokenizer.decode(t, skip_special_tokens=True) for t, _ in results[True]]
right = [a == e for a, e in zip(answers, questions.values()) if e is not None]
print(f"能逐字核对的 {len(right)} 个回答，对了 {sum(right)} 个；其中几个：")
for i in (0, 4, 9, 13, 15):
    q, expected = list(questions.items())[i]
    print(f"  {q!r} → {answers[i]!r}" + (f"（期望 {expected!r}）" if expected else ""))

# %% [markdown]
# CPU 上"流"是空壳，前向是同步执行的，重叠不出什么来；在 GPU 上，主机准备下一步的时间被
# 藏进了 GPU 算上一步的时间里（见 CUDA 的运行结果）。

# %% [markdown]
# ## 3. 中止：排队的、分块中的、运行中的

# %%
llm = make_llm(overlap=True, max_extend_tokens=16, max_running_reqs=2, num_pages=64)
sched = llm.scheduler
long = SamplingParams(max_tokens=40, ignore_eos=True)
for uid, n in enumerate([6, 50, 4]):  # 请求 1 要分 4 块；只有 2 行，请求 2 要排队
    ids = torch.arange(200 * (uid + 1), 200 * (uid + 1) + n, dtype=torch.int32)
    sched.add_request(PendingReq(uid, ids, long))
sched.step()
chunked = sched.prefill_manager.chunked
print(
    "分块中:",
    chunked.uid if chunked else None,
    " 排队:",
    [p.uid for p in sched.prefill_manager.pending],
)
for uid in (2, 1):
    print(f"中止 {uid}：", [(o.uid, o.finish_reason) for o in sched.abort_request(uid)])
    sched.check_integrity()
for _ in range(3):
    sched.step()
print(
    "运行中:", [r.uid for r in sched.decode_manager.running], " 可用页", sched.cache.available_pages
)
print("中止 0：", [(o.uid, o.finish_reason) for o in sched.abort_request(0)])
print("再中止 0：", sched.abort_request(0))
while sched.has_work:
    sched.step()
sched.check_integrity()
print("全部结束后可用页", sched.cache.available_pages, "/ 64，空闲行", sched.table.num_free)
llm.shutdown()
