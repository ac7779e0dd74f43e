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

MODEL = os.environ.get("MINISGL_MODEL", "models/tiny-qwen3")
# 在后台的子进程里启动服务、等它就绪（第 15 章的 start_background_server）
args = ["--dtype", "float32", "--num-pages", "128", "--max-seq-len-override", "1024"]
server = start_background_server(MODEL, *args, name="minisgl-ch17")
proc, base = server.proc, server.url
print(f"服务就绪（约 {server.startup_s:.0f} 秒）")
client = OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0)

# %% [markdown]
# ## 1. 流式回答和用量
#
# 官方 `openai` 客户端，流式输出；`include_usage` 让最后一个片段带上用量。

# %%
stream = client.chat.completions.create(
    model="tiny",
    messages=[{"role": "user", "content": "用一句话介绍北京。"}],
    max_tokens=16,
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
print("流式回答:", repr("".join(pieces)))
print(f"用量：提示 {usage.prompt_tokens}，生成 {usage.completion_tokens}，共 {usage.total_tokens}")

# %% [markdown]
# ## 2. KV 不够：新请求排队
#
# 每个请求要大约 50 页（提示 + 40 个 token），池子只有 128 页：同时最多跑 2 个，其余的在
# 等待队列里，等前面的结束、页还回来再进批次。跑起来的请求从不缺页，所以不需要抢占。


# %%
def metric(name: str) -> float:
    for line in httpx.get(f"{base}/metrics", timeout=30).text.splitlines():
        if line.startswith(f"minisgl_{name} "):
            return float(line.split()[1])
    raise KeyError(name)


def complete(prompt: str, max_tokens: int = 40) -> str:
    r = client.completions.create(
        model="tiny",
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    return r.choices[0].text


prompts = [f"Question {i}: what is {i} + {i}?" for i in range(6)]
alone = complete(prompts[0])
with ThreadPoolExecutor(6) as pool:
    answers = list(pool.map(complete, prompts))
print(f"6 个请求共需约 {6 * 50} 页，池子只有 128 页：全部完成，没有一个失败")
print("第一个请求和单独发时相同:", answers[0] == alone)

# %% [markdown]
# ## 3. 32 个并发流，其中一半中途断开
#
# 16 个读完，16 个读了随机几段就关掉连接。API Server 发现断开后中止请求，调度器把它的行和
# KV 页还回来。最后 `/metrics` 里：没有在跑、在等的请求，空闲页 + 可淘汰的缓存页 = 总页数。


# %%
def stream_one(i: int) -> str:
    body = {"prompt": f"story {i}", "max_tokens": 12, "stream": True, "ignore_eos": True}
    keep = 10**9 if i % 2 == 0 else random.Random(i).randint(0, 6)
    with httpx.stream("POST", f"{base}/v1/completions", json=body, timeout=120) as r:
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

# %%
long = {"prompt": "go", "max_tokens": 100, "ignore_eos": True}
result: dict[str, object] = {}


def wait_long() -> None:
    r = httpx.post(f"{base}/v1/completions", json=long, timeout=60)
    result["status"], result["body"] = r.status_code, r.json()


waiter = threading.Thread(target=wait_long)
waiter.start()
while metric("running_requests") < 1:
    time.sleep(0.02)
children = psutil.Process(proc.pid).children(recursive=True)
# 每个后端进程在 ps 里都有自己的名字（第 15 章的启动器设置），rank 0 的调度器叫这个
scheduler = next(c for c in children if c.cmdline()[:1] == ["minisgl::scheduler_0"])
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
