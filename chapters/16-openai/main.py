# %% [markdown]
# # 第 16 章：完整的 OpenAI 接口
#
# 第 15 章的服务能对话了，但它省掉了很多客户端默认会用的东西：`finish_reason` 永远是 "stop"，
# 没有 `usage`，`stop` 直接 400，没有 `/v1/completions`，过长的提示得到一个空的 200。
# 这一章把它们补齐。main 照旧像普通用户那样使用服务：启动、用官方的 `openai` 客户端调用、
# 发几个坏请求、读 `/metrics`、最后关掉。
#
# 在仓库根目录运行：`python chapters/16-openai/main.py`。

# %%
from __future__ import annotations

import os
import signal
import time

import httpx
import openai
from openai import OpenAI

from minisgl.server.launch import start_background_server

MODEL = os.environ.get("MINISGL_MODEL", "models/demo-chat")
# 在后台的子进程里启动服务、等它就绪（第 15 章的 start_background_server）
args = ["--dtype", "float32", "--num-pages", "4096", "--max-seq-len-override", "1024"]
server = start_background_server(MODEL, *args, name="minisgl-ch16")
proc, base = server.proc, server.url
print(f"服务就绪（约 {server.startup_s:.0f} 秒）")
client = OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0)

# %% [markdown]
# ## 1. `/v1/completions`：结束原因和用量
#
# `/v1/completions` 把 `prompt` 原样交给模型，不套对话模板；内嵌的演示对话模型
# （`models/demo-chat`）只认得对话格式，所以这里自己把问题写成 ChatML。第一次让它自然结束：
# 生成了停止符（`<|im_end|>`），`finish_reason` 是 "stop"；第二次 `max_tokens=8`，话说到一半被
# 截断，`finish_reason` 是 "length"。`usage` 里的两个数来自调度器：提示的 token 数，和生成的
# token 数（含停止符）。

# %%
PROMPT = "<|im_start|>user\nWhat is 1234 + 567?<|im_end|>\n<|im_start|>assistant\n"
r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=32, temperature=0)
full = r.choices[0].text
print("文本:", repr(full), " 应为:", repr("1234 + 567 = 1801"))
usage = r.usage.model_dump(exclude_none=True)
print("finish_reason:", r.choices[0].finish_reason, " usage:", usage)
r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0)
usage = r.usage.model_dump(exclude_none=True)
print("max_tokens=8:", repr(r.choices[0].text), " finish_reason:", r.choices[0].finish_reason)
print("usage:", usage)

# %% [markdown]
# ## 2. 流式对话，最后一个片段带 usage
#
# `stream_options={"include_usage": True}`：其余片段的 `usage` 是 null，`[DONE]` 之前多一个
# `choices` 为空、只带 `usage` 的片段。

# %%
stream = client.chat.completions.create(
    model=MODEL,
    messages=[{"role": "user", "content": "25 减 9000 等于多少？"}],
    max_tokens=64,
    temperature=0,
    stream=True,
    stream_options={"include_usage": True},
)
chunks = list(stream)
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
print(f"流式：{len(chunks)} 个片段，拼起来:", repr(text))
usage = chunks[-1].usage.model_dump(exclude_none=True)
print("finish_reason:", finish, " 最后一个片段的 usage:", usage)

# %% [markdown]
# ## 3. 停止串
#
# 拿上面完整回答里的 `" = "` 当停止串（它横跨两个 token：`" ="` 和 `" "`）。输出截在它之前，
# 停止串本身一个字也不出现；命中之后服务端中止了后端的请求，所以 `completion_tokens` 比完整
# 回答的少。

# %%
stop = " = "
r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=32, temperature=0, stop=[stop])
choice = r.choices[0]
print("停止串:", repr(stop), " 输出:", repr(choice.text), " finish_reason:", choice.finish_reason)
matched = choice.model_extra["matched_stop"]
print("命中的停止串:", repr(matched), " completion_tokens:", r.usage.completion_tokens)
assert choice.text == full[: full.find(stop)]

# %% [markdown]
# ## 4. seed：采样也能复现
#
# 温度 1 的采样，同一个 seed 两次结果相同，换一个 seed 就不同。第 i 个位置的随机数只由
# (seed, i) 决定，和同一批里还有哪些请求无关。这里故意用一句不套模板的原文：演示模型对它
# 毫无把握，下一个 token 的分布很散，换了 seed 才看得出采样的差别（对会答的问题它几乎总是
# 同一个回答）。

# %%
RAW = "The capital of France is"


def sample(seed: int) -> str:
    r = client.completions.create(model=MODEL, prompt=RAW, max_tokens=8, temperature=1.0, seed=seed)
    return r.choices[0].text


a, b, c = sample(7), sample(7), sample(8)
print("seed=7 两次相同:", a == b, " seed=8 不同:", a != c)

# %% [markdown]
# ## 5. 坏请求：400 和 413，说清楚是哪个字段

# %%
bad_requests = {
    "max_tokens 超过上下文": {"prompt": "hi", "max_tokens": 100000},
    "提示比上下文还长": {"prompt": "hello " * 1100, "max_tokens": 4},
    "不支持的 logprobs": {"prompt": "hi", "logprobs": 5},
    "n=2": {"prompt": "hi", "n": 2},
}
for name, body in bad_requests.items():
    resp = httpx.post(f"{base}/v1/completions", json=body, timeout=60)
    err = resp.json()["error"]
    print(f"{name}: {resp.status_code} {err['message']!r} param={err['param']}")
resp = httpx.post(f"{base}/v1/completions", content=b" " * (9 << 20), timeout=60)
print("9 MiB 的请求体:", resp.status_code, resp.json()["error"]["message"])
try:
    client.completions.create(model=MODEL, prompt="hi", max_tokens=-1)
except openai.BadRequestError as e:
    print("openai 客户端收到 BadRequestError:", e.status_code)

# %% [markdown]
# ## 6. `/metrics`
#
# 调度器变成空闲时一定会报一次账，所以请求都结束之后：没有在跑和排队的请求，空闲页加上前缀
# 缓存里可淘汰的页等于总页数。

# %%
time.sleep(0.5)  # 等调度器把"空闲"的账目报过来
metrics = httpx.get(f"{base}/metrics", timeout=30).text
keep = ("running_requests", "waiting_requests", "kv_pages", "tokens_total", "finished_total")
for line in metrics.splitlines():
    if not line.startswith("#") and any(k in line for k in keep):
        print(line)

# %% [markdown]
# ## 7. 关掉服务

# %%
proc.send_signal(signal.SIGTERM)
print("退出码:", proc.wait(timeout=60))
