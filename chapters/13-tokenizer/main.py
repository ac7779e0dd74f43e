# %% [markdown]
# # 第 13 章：分词与反分词进程
#
# 在线服务里，文本和 token 之间的转换单独放在一个 tokenizer 进程里：API Server 把文本（或对话）
# 交给它，它分好词交给调度器；调度器每一步生成的 token 也先交给它，变成一段段增量文本，再送回
# API Server。这个 main 起一个真正的 tokenizer 进程，自己同时扮演 API Server 和调度器（调度器
# 就是第 8～11 章的离线调度器，由我们手动一步一步地驱动），双方之间全部走 ZMQ 的 ipc socket。
#
# 在仓库根目录运行：`python chapters/13-tokenizer/main.py`。

# %%
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from multiprocessing.process import BaseProcess
from typing import Any

import psutil
import torch

from minisgl.core import SamplingParams
from minisgl.engine import has_weight_files
from minisgl.llm import LLM
from minisgl.message import (
    AbortBackendMsg,
    AbortMsg,
    BaseBackendMsg,
    BaseFrontendMsg,
    BaseTokenizerMsg,
    BatchBackendMsg,
    BatchFrontendMsg,
    BatchTokenizerMsg,
    DetokenizeMsg,
    TokenizeMsg,
    UserMsg,
)
from minisgl.scheduler import PendingReq
from minisgl.tokenizer import tokenize_worker
from minisgl.utils import ZmqPullQueue, ZmqPushQueue, load_tokenizer, pick_device

MODEL = os.environ.get("MINISGL_MODEL", "models/demo-chat")
device = pick_device()
print("设备:", device.type, " 模型:", MODEL)

# 三个地址放在 /tmp 下的一个短目录里（ipc socket 的路径有长度上限，见第 12 章）
ipc = tempfile.mkdtemp(prefix="msgl-", dir="/tmp")
TOKENIZER_ADDR = f"ipc://{ipc}/tokenizer"  # tokenizer 进程 bind；API Server 和调度器都往这里推
BACKEND_ADDR = f"ipc://{ipc}/backend"  # 调度器 bind，tokenizer 往这里推 UserMsg
FRONTEND_ADDR = f"ipc://{ipc}/frontend"  # API Server bind，tokenizer 往这里推 UserReply

# 我们扮演的两方，各有一进一出两个队列
api_send = ZmqPushQueue(TOKENIZER_ADDR, create=False, encoder=BaseTokenizerMsg.encoder)
api_recv = ZmqPullQueue(FRONTEND_ADDR, create=True, decoder=BaseFrontendMsg.decoder)
sched_send = ZmqPushQueue(TOKENIZER_ADDR, create=False, encoder=BaseTokenizerMsg.encoder)
sched_recv = ZmqPullQueue(BACKEND_ADDR, create=True, decoder=BaseBackendMsg.decoder)


def receive(queue: ZmqPullQueue[Any], n: int, timeout_s: float = 60.0) -> list[Any]:
    """从队列里收 n 条消息（Batch...Msg 拆开来数）。等太久就报错，而不是永远卡住。"""
    got: list[Any] = []
    while len(got) < n:
        if queue.socket.poll(timeout=int(timeout_s * 1000)) == 0:
            raise TimeoutError(f"expected {n} messages, got {len(got)}")
        msg = queue.get()
        got += msg.data if isinstance(msg, (BatchBackendMsg, BatchFrontendMsg)) else [msg]
    return got


# %% [markdown]
# ## 1. 启动 tokenizer 进程
#
# 和第 15 章的启动器一样用 spawn：子进程是一个全新的解释器，在里面加载分词器、建好 socket，
# 然后往 `ack_queue` 里放一句"准备好了"。启动器（这里是我们）收到这句话才开始发请求。

# %%
ctx = mp.get_context("spawn")
ack_queue = ctx.Queue()
worker = ctx.Process(
    target=tokenize_worker,
    name="minisgl-tokenizer-0",
    daemon=True,  # 万一本脚本中途出错退出，multiprocessing 会替我们结束它
    kwargs=dict(
        tokenizer_path=MODEL,
        addr=TOKENIZER_ADDR,
        create=True,
        backend_addr=BACKEND_ADDR,
        frontend_addr=FRONTEND_ADDR,
        local_bs=8,
        ack_queue=ack_queue,
        tokenizer_id=0,
    ),
)


def start(proc: BaseProcess) -> None:
    """启动 spawn 子进程。spawn 默认会在子进程里把主脚本重新执行一遍（为了找到 target），所以
    multiprocessing 要求脚本把顶层代码放进 ``if __name__ == "__main__"``。我们的 target 在 minisgl
    包里，用不着主脚本：启动的那一刻把主模块的 ``__file__`` 藏起来，子进程就不会再执行本文件
    （在 notebook 里主模块本来就没有 ``__file__``）。"""
    main = sys.modules["__main__"]
    path = main.__dict__.pop("__file__", None)
    try:
        proc.start()
    finally:
        if path is not None:
            main.__file__ = path


start(worker)
print("收到:", ack_queue.get(timeout=120))
print("socket 文件:", sorted(os.listdir(ipc)))

# %% [markdown]
# ## 2. 分词：对话套模板，字符串原样编码
#
# 我们（API Server）发三个请求给演示模型（`models/demo-chat`）：中文对话、带 system 的英文对话、
# 一段纯文本（自己写好了对话模板的字符串）。另有一个空字符串，看出错的请求怎样走完全程。
# tokenizer 把它们分好词，作为 `UserMsg` 推给调度器（也是我们）。

# %%
tokenizer = load_tokenizer(MODEL)
requests: dict[int, str | list[dict[str, str]]] = {
    0: [{"role": "user", "content": "跟我说：qzjx kwvb"}],
    1: [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Who are you?"},
    ],
    # 纯文本原样编码：里面的 <|im_start|> 等照样认成特殊 token，和套模板得到的一样
    2: "<|im_start|>user\nWhat is 1234 + 567?<|im_end|>\n<|im_start|>assistant\n",
    3: "",  # 空的提示：调度器会拒绝它
}
expected = {0: "你说的是：qzjx kwvb", 2: "1234 + 567 = 1801"}  # uid 1 会被中止
for uid, text in requests.items():
    params = SamplingParams(max_tokens=48)  # 温度 0：贪心；遇到停止符 <|im_end|> 就结束
    api_send.put(TokenizeMsg(uid=uid, text=text, sampling_params=params))

user_msgs: dict[int, UserMsg] = {m.uid: m for m in receive(sched_recv, len(requests))}
for uid, m in sorted(user_msgs.items()):
    shown = tokenizer.decode(m.input_ids.tolist())
    print(f"uid {uid}：{len(m.input_ids):2d} 个 token（{m.input_ids.dtype}） {shown!r}")

# %% [markdown]
# 对话被模板渲染成 `<|im_start|>角色\n内容<|im_end|>\n` 的形式，末尾多了
# `<|im_start|>assistant\n`——"轮到助手说话了"（`add_generation_prompt=True`）。纯文本原样编码，
# 前后什么也不加：uid 2 的字符串自己写好了模板，编码出来和套模板的对话是同一种样子。演示模型
# 只认得对话，真正的"纯文本续写"（比如"从前有座山，"）它只会胡乱接下去。

# %% [markdown]
# ## 3. 调度器一步一步地生成，tokenizer 一步一步地反分词
#
# 我们把 `UserMsg` 交给第 8 章的调度器，每走一步，把这一步的输出变成 `DetokenizeMsg` 推给
# tokenizer，再从 API Server 那一头收回 `UserReply`：一条 `DetokenizeMsg` 对应一条 `UserReply`。
# 第 3 步之后"客户端断开了"uid 1：API Server 发 `AbortMsg`，tokenizer 转成 `AbortBackendMsg`
# 交给调度器。

# %%
weights = dict(dummy_weights=not has_weight_files(MODEL))
llm = LLM(MODEL, device=device, dtype=torch.float32, num_pages=512, max_seq_len=256, **weights)
sched = llm.scheduler
outputs = []
for uid, m in sorted(user_msgs.items()):
    error = sched.add_request(PendingReq(uid, m.input_ids, m.sampling_params))
    if error is not None:  # 出错的请求不进队列，立刻得到一个结束输出
        outputs.append(error)

texts: dict[int, str] = defaultdict(str)
tokens: dict[int, list[int]] = defaultdict(list)
step = 0
while outputs or sched.has_work:
    if step == 3:  # API Server：uid 1 的客户端断开了
        api_send.put(AbortMsg(uid=1))
        for cmd in receive(sched_recv, 1):
            assert isinstance(cmd, AbortBackendMsg)
            print(f"调度器收到 {cmd}")
            outputs += sched.abort_request(cmd.uid)
    step += 1
    outputs += sched.step()
    if not outputs:
        continue
    # 和第 14 章的调度器一样：一步的输出打包成一条消息；没有 token（出错、中止）时发 -1
    detok = [DetokenizeMsg(o.uid, -1 if o.token is None else o.token, o.finished) for o in outputs]
    sched_send.put(BatchTokenizerMsg(data=detok))  # type: ignore[arg-type]
    replies = receive(api_recv, len(detok))
    for o in outputs:
        if o.token is not None:
            tokens[o.uid].append(o.token)
    line = []
    for r in replies:
        texts[r.uid] += r.incremental_output
        line.append(f"{r.uid}:{r.incremental_output!r}" + ("（结束）" if r.finished else ""))
    print(f"第 {step} 步 ", "  ".join(line))
    outputs = []

for uid in sorted(requests):
    full = tokenizer.decode(tokens[uid], skip_special_tokens=True)
    print(f"uid {uid}：{len(tokens[uid])} 个 token，增量拼起来 == 整体解码：{texts[uid] == full}")
    if tokens[uid]:
        note = f"期望 {expected[uid]!r}" if uid in expected else "中止了，只说了个开头"
        print(f"    回答 {texts[uid]!r}（{note}）")
llm.shutdown()

# %% [markdown]
# 四个请求的 token 在每一步里交错到达，tokenizer 按 uid 各自记账，互不干扰。空提示在第一步就以
# -1 结束：调度器拒绝了它，tokenizer 回一个空的结束回复，API Server 不会干等。uid 1 被中止后，
# 调度器回一个 -1 的结束输出，它的反分词状态随之删掉。回答说完时模型生成停止符 `<|im_end|>`，
# 它不变成文本：结束的那一步增量是空的。

# %% [markdown]
# ## 4. 一个字符被切在几个 token 里
#
# 上面的回答里，中文字多半是一个 token 一个字，看不出增量反分词难在哪里。我们手工拼一串
# token，代替调度器逐个发送：
# Qwen 的分词器按字节切分，`好`、`订`、`🫠` 都被拆在两三个 token 里，有的 token 还横跨两个字符
# （第 6 个 token 是 `订` 的最后一个字节加上整个 `单`）。最后一个是停止符 `<|im_end|>`。

# %%
pieces = [
    13048,  # b"Hi"
    4891,  # b" \xe5"：空格 + "好" 的第 1 个字节
    98,  # b"\xa5"
    121,  # b"\xbd"：凑齐了 "好"
    10203,  # b"\xe8\xae"："订" 的前 2 个字节
    43720,  # b"\xa2\xe5\x8d\x95"："订" 的最后 1 个字节 + 整个 "单"
    9284,  # b"\xf0\x9f"："🫠" 的前 2 个字节
    104,  # b"\xab"
    254,  # b"\xa0"：凑齐了 "🫠"
    0,  # b"!"
    151645,  # <|im_end|>：停止符
]
# 这些 token 号属于 Qwen 的词表（内嵌模型、Qwen3 系列）；换了别的词表，这一节就没有意义了
assert tokenizer.decode(pieces[:-1]) == "Hi 好订单🫠!", "section 4 needs the Qwen vocabulary"
print(f"{'token':>6}  单独解码      发出的增量")
streamed = ""
for i, token in enumerate(pieces):
    finished = i == len(pieces) - 1
    sched_send.put(DetokenizeMsg(uid=100, next_token=token, finished=finished))
    (reply,) = receive(api_recv, 1)
    streamed += reply.incremental_output
    print(f"{token:>6}  {tokenizer.decode([token])!r:12s}  {reply.incremental_output!r}")
print("拼起来:", repr(streamed))
print("整体解码:", repr(tokenizer.decode(pieces, skip_special_tokens=True)))

# %% [markdown]
# 单独解码每个 token，得到的多是 `�`；增量里一个 `�` 也没有：最后一个字符不完整时先不发，
# 凑齐了再发，`" \xe5"` 里已经完整的空格先发了出去。停止符不变成文本。

# %% [markdown]
# ## 5. 关掉
#
# `terminate()` 发 SIGTERM：tokenizer 进程从阻塞的接收里醒来，关掉自己的 socket（它 bind 的
# socket 文件随之删掉）后正常退出。

# %%
worker.terminate()
worker.join(timeout=30)
print("tokenizer 进程退出码:", worker.exitcode)
for q in (api_send, api_recv, sched_send, sched_recv):
    q.stop()
print("剩下的 socket 文件:", os.listdir(ipc))
print("tokenizer 进程还在吗:", psutil.pid_exists(worker.pid))
print("活着的子进程:", mp.active_children())
shutil.rmtree(ipc)
