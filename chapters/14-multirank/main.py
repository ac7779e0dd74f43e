# %% [markdown]
# # 第 14 章：多 rank——rank 0 广播与一致的调度决策
#
# 张量并行时每个 rank 是一个调度器进程，各自有一份调度器、一份 KV 池的账目。它们必须在每一步
# 做出**完全相同**的决策（同样的请求、同样的批次），否则 all_reduce 对不上，整个服务卡死。
# 办法是：只有 rank 0 从 tokenizer 收消息，把原始字节原样广播给其他 rank；每一步先用 gloo
# 对齐"这一步收了几条"，各 rank 再各取这么多条。这一章在调度器里接上 ZMQ，用两个 CPU 进程
# （gloo）跑通它。
#
# 在仓库根目录运行：`python chapters/14-multirank/main.py`（`MINISGL_TP=4` 换成 4 个 rank）。

# %%
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time

import torch

from minisgl.core import SamplingParams
from minisgl.distributed import spawn_ranks
from minisgl.llm import LLM
from minisgl.message import BaseBackendMsg, BaseTokenizerMsg, BatchTokenizerMsg, ExitMsg, UserMsg
from minisgl.scheduler import SchedulerConfig, run_scheduler
from minisgl.utils import ZmqPullQueue, ZmqPushQueue, load_tokenizer

MODEL = "models/demo-chat"  # 会回答简单问题的演示模型
TP = int(os.environ.get("MINISGL_TP", "2"))
# 默认两个 rank：GPU 够数就各用一块（NCCL），否则都在 CPU 上（gloo）
rank_device = "cuda" if torch.cuda.device_count() >= TP else "cpu"
folder = tempfile.mkdtemp(prefix="m14-", dir="/tmp")  # ipc 路径要短：见第 12 章
config = SchedulerConfig(
    MODEL,
    dtype=torch.float32,
    num_pages=256,
    max_seq_len=128,
    zmq_backend_addr=f"ipc://{folder}/backend",
    zmq_detokenizer_addr=f"ipc://{folder}/detok",
    zmq_broadcast_addr=f"ipc://{folder}/bcast",
)
print(f"{TP} 个 rank 在", rank_device, "上")

# %% [markdown]
# ## 1. 先发请求，再等 rank 起来
#
# 主进程这里扮演 tokenizer 和 detokenizer：把问题套上对话模板、分好词，PUSH 给 rank 0，
# PULL 生成的 token。两个 rank 在
# 后台线程里用 `spawn_ranks` 拉起；请求**立刻**发出，不等它们就绪。ZMQ 的 PUSH 在对方还没绑定
# 地址时先把消息排在自己这边，rank 0 一绑定就收到。rank 0 的广播用 XPUB，等 rank 1 的订阅生效
# 之后才开始：官方用普通 PUB，第一条广播可能被丢掉，rank 1 就永远等不到它。

# %%
detok = ZmqPullQueue(config.zmq_detokenizer_addr, True, BaseTokenizerMsg.decoder)
push = ZmqPushQueue(config.zmq_backend_addr, False, BaseBackendMsg.encoder)
tokenizer = load_tokenizer(MODEL)
# 问题 → 期望的回答
questions = {
    "What is 1234 + 567?": "1234 + 567 = 1801",
    "排序：42 7 19": "7 19 42",
    "Reverse: 3 14 15 92": "92 15 14 3",
    "Repeat after me: qzjx kwvb": "You said: qzjx kwvb",
}
prompts = [
    tokenizer.encode(
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
        ),
        add_special_tokens=False,
    )
    for q in questions
]
params = SamplingParams(max_tokens=32)  # 遇到停止符 <|im_end|> 就结束
results: list = []
os.environ["MINISGL_LOG_LEVEL"] = "WARNING"  # 两个 rank 的日志交错的先后每次都不同：只留警告和错误
ranks = threading.Thread(
    target=lambda: results.extend(spawn_ranks(run_scheduler, TP, (config,), device=rank_device))
)
t0 = time.perf_counter()
ranks.start()
for uid, p in enumerate(prompts):
    push.put(UserMsg(uid=uid, input_ids=torch.tensor(p, dtype=torch.int32), sampling_params=params))

tokens: dict[int, list[int]] = {uid: [] for uid in range(len(prompts))}
finished: set[int] = set()
while len(finished) < len(prompts):
    batch = detok.get()
    assert isinstance(batch, BatchTokenizerMsg)
    for msg in batch.data:
        tokens[msg.uid].append(msg.next_token)
        if msg.finished:
            finished.add(msg.uid)
print(f"4 个请求都完成了（约 {time.perf_counter() - t0:.0f} 秒，包括两个 rank 的启动）")
for uid, (q, expected) in enumerate(questions.items()):
    answer = tokenizer.decode(tokens[uid], skip_special_tokens=True)
    print(f"  {q!r} → {answer!r}（期望 {expected!r}）")
push.put(ExitMsg())
ranks.join(timeout=120)
assert not ranks.is_alive(), "ranks did not exit"
push.stop()
detok.stop()

# %% [markdown]
# ## 2. 两个 rank 的调度完全一致
#
# 每个调度器把每一步的决策（阶段、请求、新 token 数）汇成一个摘要。摘要相同，就说明两个 rank
# 每一步都做了同样的事。

# %%
digests = [digest for digest, _ in results]
traces = [trace for _, trace in results]
print("，".join(f"rank {r} 摘要 {d[:12]}" for r, d in enumerate(digests)), end="")
print(f"，相同: {len(set(digests)) == 1}")
print(f"共 {len(traces[0])} 步，前 3 步（各 rank 相同: {all(t == traces[0] for t in traces)}）:")
for step in traces[0][:3]:
    print("  ", step)

# %% [markdown]
# ## 3. tp=2 与 tp=1 生成相同的 token

# %%
llm = LLM(MODEL, device="cpu", dtype=torch.float32, num_pages=256, max_seq_len=128)
single = [o.token_ids for o in llm.generate(prompts, params)]
llm.shutdown()
print(f"tp={TP} == tp=1:", [tokens[uid] for uid in range(len(prompts))] == single)
shutil.rmtree(folder, ignore_errors=True)  # socket 文件在各自 stop() 时已经删掉了
