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
from minisgl.utils import pick_device

MODEL = os.environ.get("MINISGL_MODEL", "models/tiny-qwen3")
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
# 停止符让一些请求提前结束：重叠调度下它们会被多算一步，那一步的 token 丢掉。

# %%
prompts = [list(range(1000 + 37 * i, 1000 + 37 * i + 8 + 3 * i)) for i in range(16)]
params = [SamplingParams(max_tokens=16 + (i % 5) * 8) for i in range(16)]
probe = make_llm(overlap=False)
eos = probe.generate(prompts[:1], SamplingParams(max_tokens=8, ignore_eos=True))[0].token_ids[5]
probe.shutdown()
results, speed = {}, {}
for overlap in (False, True):
    llm = make_llm(overlap, eos_token_ids=(eos,))
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
