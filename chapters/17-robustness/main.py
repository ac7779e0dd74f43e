# %% [markdown]
# # 第 17 章：健壮性
#
# 一个服务除了"答得对"，还要"扛得住"：KV 池不够时不死锁、成百个并发流不出错、客户端随时断开
# 不漏资源、后端进程被杀时客户端马上知道而不是永远等着、整个服务干净地退出。这个 main 把这些
# 情况依次演一遍。KV 池故意只给 128 页（每页 1 个 token），好让请求排队。
#
# 在仓库根目录运行：`python chapters/17-robustness/main.py`（也就是 `make run`）。

# %%
from __future__ import annotations

import glob
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
from openai import OpenAI

from minisgl.server.launch import start_background_server

MODEL = os.environ.get("MINISGL_MODEL", "models/demo-chat")
# 在后台的子进程里启动服务、等它就绪（第 15 章的 start_background_server）
args = ["--dtype", "float32", "--num-pages", "128", "--max-seq-len-override", "1024"]
args += ["--kv-headroom", "8"]  # 接纳时每个运行中的请求只预留往后 8 个 token 的页（默认 256）
server = start_background_server(MODEL, *args, name="minisgl-ch17")
proc, base = server.proc, server.url
print(f"服务就绪（约 {server.startup_s:.0f} 秒）")
client = OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0)

# %% [markdown]
# ## 1. 问几个问题：流式回答和用量
#
# 默认的模型是书里训练的演示对话模型（附录讲它怎么训练）：会做四位数以内的加减法、给一串数排序或
# 倒过来、原样复述一句话。它的回答有标准答案，所以一眼就能看出引擎算得对不对：KV 缓存、位置、
# 页表哪里错了，答案马上就错。官方 `openai` 客户端，流式输出；`include_usage` 让最后一个片段
# 带上用量。

# %%
questions = {
    "What is 1234 + 567?": str(1234 + 567),
    "4096 减 8191 等于多少？": str(4096 - 8191),
    "Sort: 42 7 19 88 3": " ".join(map(str, sorted([42, 7, 19, 88, 3]))),
    "倒过来：3 14 15 92 65": " ".join(map(str, [3, 14, 15, 92, 65][::-1])),
    "Repeat after me: minisgl serves tokens": "minisgl serves tokens",
    "你好": "minisgl",
}
for question, expected in questions.items():
    stream = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": question}],
        max_tokens=64,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            usage = chunk.usage
    answer = "".join(pieces)
    verdict = "对" if expected in answer else "错"
    print(f"问：{question}\n答：{answer}\n   应含 {expected!r}：{verdict}")
usage_line = f"提示 {usage.prompt_tokens}，生成 {usage.completion_tokens}，共 {usage.total_tokens}"
print("最后一问的用量：" + usage_line)

# %% [markdown]
# ## 2. KV 不够：乐观接纳，缺页时退回
#
# 6 个加法题同时到达，都没写 `max_tokens`——按聊天接口的默认，每个都可以一直生成到上下文的上限。
# 整段预留的话，一个请求就占满 128 页的池子，其余的全得等。乐观接纳只为每个请求预留往后 8 个
# token：一下跑起 4 个；回答写到一半，池子满了，最晚接纳的那个被退回等待队列，前面的做完、
# 页还回来之后，它从"提示 + 已经生成的"接着算。客户端只觉得它慢了一点，答案一个字不差。
# 为了让 6 个请求在同一步进调度器，先冻住调度器，等 API Server 把它们全收下再放开。


# %%
def metric(name: str) -> float:
    for line in httpx.get(f"{base}/metrics", timeout=30).text.splitlines():
        if line.startswith(f"minisgl_{name} "):
            return float(line.split()[1])
    raise KeyError(name)


def complete(question: str) -> str:
    r = client.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": question}], temperature=0
    )
    return r.choices[0].message.content or ""


children = psutil.Process(proc.pid).children(recursive=True)
# 每个后端进程在 ps 里都有自己的名字（第 15 章的启动器设置），rank 0 的调度器叫这个
scheduler = next(c for c in children if c.cmdline()[:1] == ["minisgl::scheduler_0"])
sums = [(1000 + 111 * i, 2345 + i) for i in range(6)]
prompts = [f"What is {a} + {b}?" for a, b in sums]
alone = complete(prompts[0])
scheduler.suspend()
with ThreadPoolExecutor(6) as pool:
    futures = [pool.submit(complete, p) for p in prompts]
    while metric("http_requests_in_flight") < 6:  # API Server 自己的账：请求都已经收下
        time.sleep(0.02)
    time.sleep(0.5)  # 让 tokenizer 把它们都转给调度器
    scheduler.resume()
    answers = [f.result() for f in futures]
right = sum(str(a + b) in answer for (a, b), answer in zip(sums, answers))
time.sleep(0.5)  # 调度器空闲时报一次账
print(f"6 个请求都没写 max_tokens，池子只有 128 页：{right} 个答对；", end="")
print(f"decode 缺页时退回请求 {metric('requests_retracted_total'):.0f} 次")
print("第一个请求和单独发时相同:", answers[0] == alone)

# %% [markdown]
# ## 3. 32 个并发流，其中一半中途断开
#
# 16 个读完，16 个读了随机几段就关掉连接。API Server 发现断开后中止请求，调度器把它的行和
# KV 页还回来。最后 `/metrics` 里：没有在跑、在等的请求，空闲页 + 可淘汰的缓存页 = 总页数。


# %%
def stream_one(i: int) -> str:
    # 复述三个词：回答有十来个 token，每个 token 各是一段，读不到 6 行就断开的流一定没读完
    rng = random.Random(i)
    words = " ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=4)) for _ in range(3))
    question = {"role": "user", "content": f"Repeat after me: {words}"}
    body = {"messages": [question], "max_tokens": 16, "stream": True}
    keep = 10**9 if i % 2 == 0 else rng.randint(0, 6)
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=300) as r:
        for k, line in enumerate(r.iter_lines()):
            if k >= keep:
                return "disconnected"
            if line == "data: [DONE]":
                return "done"
    return "truncated"


with ThreadPoolExecutor(32) as pool:
    outcomes = list(pool.map(stream_one, range(32)))
print({k: outcomes.count(k) for k in sorted(set(outcomes))})
deadline = time.time() + 60
while time.time() < deadline:
    idle = metric("running_requests") == metric("waiting_requests") == 0
    pages = metric("kv_pages_free") + metric("kv_pages_cached")
    if idle and pages == metric("kv_pages_capacity"):
        break
    time.sleep(0.1)
running, waiting_now = metric("running_requests"), metric("waiting_requests")
print(f"断开之后：在跑 {running:.0f}，等待 {waiting_now:.0f}，", end="")
print(f"空闲 + 可淘汰的页 {pages:.0f} / {metric('kv_pages_capacity'):.0f}")
print("之后的请求不受影响:", complete(prompts[0]) == alone)

# %% [markdown]
# ## 4. 后端进程被杀
#
# 模拟调度器崩溃（`kill -9`）。主进程里的看门狗线程立刻发现：正在等的请求收到 503 或流里的
# 错误事件，`/health` 变成 503，两秒后整个服务退出，退出码 1，不留进程和 socket 文件。
# GPU 上 100 个 token 不到一眨眼就算完了，所以先把调度器冻住（SIGSTOP），等请求进了门再杀。

# %%
long = {"prompt": "go", "max_tokens": 100, "ignore_eos": True}
result: dict[str, object] = {}


def wait_long() -> None:
    r = httpx.post(f"{base}/v1/completions", json=long, timeout=60)
    result["status"], result["body"] = r.status_code, r.json()


scheduler.suspend()
waiter = threading.Thread(target=wait_long)
waiter.start()
while metric("http_requests_in_flight") < 1:  # API Server 自己的账：请求已经收下
    time.sleep(0.02)
scheduler.kill()
waiter.join(60)
print("进行中的请求:", result["status"], result["body"]["error"]["message"])
health = httpx.get(f"{base}/health", timeout=5)
print("/health:", health.status_code)
code = proc.wait(timeout=60)
time.sleep(0.5)
left = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
files = glob.glob(f"/tmp/minisgl_*.pid={proc.pid}")
print(f"服务退出：退出码 {code}，剩下的进程 {len(left)} 个，残留的 socket 文件 {len(files)} 个")
