# %% [markdown]
# # 第 15 章：API Server 与启动器
#
# 最后一块拼图：`python -m minisgl --model ...` 拉起调度器和 tokenizer 进程，在 HTTP 端口上提供
# OpenAI 兼容的接口。这个 main 像一个普通用户那样使用它：在另一个进程里启动服务，等它就绪，
# 用官方的 `openai` 客户端对话（非流式、流式、多轮），同时发 8 个请求看连续批处理，发一个坏请求
# 看 400，最后像按 Ctrl-C 一样关掉它，确认没有留下任何进程和 socket 文件。
#
# 在仓库根目录运行：`python chapters/15-server/main.py`（`MINISGL_TP=2` 让服务用两个调度器
# rank，即 `--tp 2`）。服务本身：`python -m minisgl`（不给 `--model` 时用内嵌的演示对话模型
# `models/demo-chat`；`--shell` 则在终端里直接对话）。

# %%
from __future__ import annotations

import glob
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
from openai import OpenAI

from minisgl.server.launch import start_background_server

MODEL = os.environ.get("MINISGL_MODEL", "models/demo-chat")
TP = int(os.environ.get("MINISGL_TP", "1"))

# %% [markdown]
# ## 1. 在后台启动服务，等它就绪
#
# `start_background_server` 在一个新的会话（进程组）里运行 `python -m minisgl`：端口由内核挑，
# 日志写进临时文件，最后可以把服务和它的子进程当成一组来检查、来收拾；无论中途出了什么错，
# 解释器退出时整组都会被杀掉。启动器收齐所有子进程的"就绪"之后才开始监听端口，所以 `/health`
# 第一次返回 200，服务就一定可以用了。

# %%
args = ["--dtype", "float32", "--num-pages", "4096", "--max-seq-len-override", "1024"]
server = start_background_server(MODEL, *args, "--tp", str(TP), name="minisgl-ch15")
proc, base = server.proc, server.url
children = psutil.Process(proc.pid).children(recursive=True)
# 后端进程在 ps 里叫 minisgl::scheduler_0、minisgl::detokenizer……（另有一个 multiprocessing 的
# resource_tracker，不算）
workers = [c for c in children if " ".join(c.cmdline()).startswith("minisgl::")]
print(
    f"服务就绪（约 {server.startup_s:.0f} 秒）：主进程（API Server）+ {len(workers)} 个工作进程"
    f"（调度器、tokenizer）"
)
client = OpenAI(base_url=f"{base}/v1", api_key="none")
print("模型列表:", [m.id for m in client.models.list().data])

# %% [markdown]
# ## 2. 非流式：问几个问题
#
# 内嵌的演示模型（`models/demo-chat`，4 层、隐藏维度 256）只学过几件事：三四位数的加减法、
# 给几个数排序或倒过来、跟着你说、自我介绍，别的问题一律礼貌地拒绝。它是确定的（贪心、
# float32），每次运行逐字相同。`messages` 是整段对话：服务端不记对话，多轮时历史由客户端每次
# 带上；这个小模型只学过单轮问答，所以这里每个问题单独发。

# %%
questions = {
    "What is 1234 + 567?": "1234 + 567 = 1801",
    "25 减 9000 等于多少？": "25 - 9000 = -(9000 - 25) = -8975",
    "排序：42 7 19": "7 19 42",
    "你好": None,  # 一段固定的自我介绍
}
for question, expected in questions.items():
    messages = [{"role": "user", "content": question}]
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=64, temperature=0)
    answer = r.choices[0].message.content
    print(f"问 {question!r}\n  答 {answer!r}（finish_reason: {r.choices[0].finish_reason}）")
    if expected is not None:
        print(f"  应为 {expected!r}，对了: {answer == expected}")

# %% [markdown]
# ## 3. 流式：SSE，一个 token 一个片段

# %%
stream = client.chat.completions.create(
    model=MODEL,
    messages=[{"role": "user", "content": "Repeat after me: qzjx kwvb"}],
    max_tokens=16,
    temperature=0,
    stream=True,
)
chunks = list(stream)
pieces = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
print(f"流式: {len(chunks)} 个片段，其中 {len(pieces)} 个带文本:", pieces)
print("拼起来:", repr("".join(pieces)))
print(
    "第一个片段的 role:",
    chunks[0].choices[0].delta.role,
    " 最后一个片段的 finish_reason:",
    chunks[-1].choices[0].finish_reason,
)

# %% [markdown]
# ## 4. 8 个并发请求
#
# 先单独发一个，再同时发 8 个（各 32 个 token，`ignore_eos` 让它们都生成满）。调度器把同时
# 在跑的请求合成一个批次，8 个请求的总用时和 1 个差不多。


# %%
def ask(i: int) -> float:
    t = time.perf_counter()
    client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": f"What is {1200 + i} + 345?"}],
        max_tokens=32,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    return time.perf_counter() - t


ask(100)  # 预热
single = ask(0)
t = time.perf_counter()
with ThreadPoolExecutor(8) as pool:
    latency = list(pool.map(ask, range(8)))
total = time.perf_counter() - t
print(f"单独一个请求 {single:.2f}s；8 个并发请求总用时 {total:.2f}s", end="")
print(f"（单个 {min(latency):.2f}～{max(latency):.2f}s），是单独一个的 {total / single:.1f} 倍")

# %% [markdown]
# ## 5. 坏请求得到 400，服务照常工作

# %%
bad = httpx.post(f"{base}/v1/chat/completions", json={"model": "tiny"}, timeout=30)
print("缺少 messages 和 prompt:", bad.status_code, bad.json())
bad = httpx.post(
    f"{base}/v1/chat/completions",
    content=b'{"model": "tiny", "messages": [',
    headers={"content-type": "application/json"},
    timeout=30,
)
print("JSON 不完整:", bad.status_code, bad.json()["error"]["message"])

# %% [markdown]
# ## 6. 客户端中途断开
#
# 流式请求读了几段就断开。API Server 写下一段时发现连接断了，给调度器发中止；调度器释放这个
# 请求的 KV 页和请求表的行。每个调度器 rank 从"有活"变成"没活"时在日志里报一次自己的账目：
# 张量并行时每个 rank 各有一个 KV 池（存自己那几个 KV 头），每个都要还回来。


# %%
def kv_reports(text: str, when: str) -> dict[int, tuple[str, str]]:
    """日志里每个 rank 最近一次 ``when``（ready 或 idle）时的（可用 KV 页，空闲行）。"""
    line = rf"(?:\|rank=(\d+))?\] INFO +{when}: KV pages available (\S+) .*free rows (\S+)"
    return {int(m[1] or 0): (m[2], m[3]) for m in re.finditer(line, text)}


before = len(server.log_text())
body = {"model": MODEL, "messages": [{"role": "user", "content": "讲个长故事。"}]}
body.update(max_tokens=900, stream=True, ignore_eos=True)
with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=60) as r:
    events = [line for _, line in zip(range(3), (x for x in r.iter_lines() if x))]
print(f"读了 {len(events)} 段就断开")
t0 = time.time()
while len(kv_reports(server.log_text()[before:], "idle")) < TP and time.time() - t0 < 60:
    time.sleep(0.1)
text = server.log_text()
ready, idle = kv_reports(text, "ready"), kv_reports(text[before:], "idle")
print("服务端中止了这个请求:", "Aborting request" in text[before:])
for rank in range(TP):
    (pages, rows), after = ready[rank], idle.get(rank, ("?", "?"))
    print(f"  rank {rank}：启动时可用页 {pages}、空闲行 {rows}；", end="")
    print(f"断开后 {after[0]}、{after[1]}，全部还回来了: {after == (pages, rows)}")

# %% [markdown]
# ## 7. 像 Ctrl-C 一样关掉
#
# 给主进程发 SIGINT。启动器先停掉 HTTP 服务，再让调度器收到 `ExitMsg` 自己退出，tokenizer
# 收到 SIGTERM 后关掉自己的 socket 退出，最后确认没有残留的 ipc socket 文件。


# %%
def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


pids = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
code = server.stop()  # SIGINT，等它退出
deadline = time.time() + 10  # multiprocessing 的 resource_tracker 在主进程退出之后才退出
while any(alive(p) for p in pids) and time.time() < deadline:
    time.sleep(0.1)
left = [p for p in pids if alive(p)]
files = glob.glob(f"/tmp/minisgl_*.pid={proc.pid}")
print(f"关闭：退出码 {code}，剩下的进程 {len(left)} 个，残留的 socket 文件 {len(files)} 个")
