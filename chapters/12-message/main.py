# %% [markdown]
# # 第 12 章：消息、序列化与 ZMQ
#
# 从这一章起，引擎要拆成几个进程：API Server、tokenizer / detokenizer、调度器。它们之间
# 传的是消息：每种消息一个 dataclass，一个通用函数把它变成只含基本类型的 dict，msgpack
# 再把 dict 变成字节，由 ZMQ 的 socket 送到另一个进程。这个 main 把这条路走一遍：
# 对象 → dict → 字节 → 对象；PUSH/PULL 管道；XPUB/SUB 广播，以及它为什么要等订阅者。
#
# 在仓库根目录运行：`python chapters/12-message/main.py`。不加载模型，只用 CPU。

# %%
from __future__ import annotations

import os
import shutil
import tempfile

import msgpack
import torch

from minisgl.core import SamplingParams
from minisgl.message import BaseBackendMsg, BatchBackendMsg, ExitMsg, MessageDecodeError, UserMsg
from minisgl.utils import (
    ZmqPubQueue,
    ZmqPullQueue,
    ZmqPushQueue,
    ZmqSubQueue,
    ipc_addr,
    ipc_path,
)

# %% [markdown]
# ## 1. 一条消息：对象 → dict → msgpack 字节 → 对象
#
# tokenizer 发给调度器的是 `UserMsg`：请求号、提示的 token（1 维 int32 张量）、采样参数。
# 外面再包一层 `BatchBackendMsg`，一次送好几条。

# %%
msg = BatchBackendMsg(
    data=[
        UserMsg(
            uid=7,
            input_ids=torch.tensor([9707, 11, 1879], dtype=torch.int32),
            sampling_params=SamplingParams(temperature=0.6, max_tokens=64),
        )
    ]
)
d = msg.encoder()
print("encoder() 得到的 dict：")
print("  外层:", {k: v for k, v in d.items() if k != "data"}, " data[0] =")
print("   ", d["data"][0])
raw = msgpack.packb(d, use_bin_type=True)
print(f"msgpack 之后 {len(raw)} 字节，其中 token 只占 {3 * 4} 字节")
back = BaseBackendMsg.decoder(msgpack.unpackb(raw, raw=False))
user = back.data[0]
print("解码回来:", type(back).__name__, user.uid, user.input_ids, user.sampling_params)

# %% [markdown]
# 张量存成原始字节加 dtype 字符串。numpy 没有 bfloat16，所以我们按字节（uint8）取数据，
# 任何 dtype 都一样：

# %%
for dtype in (torch.int64, torch.float32, torch.bfloat16):
    t = torch.tensor([1.5, -2.0, 3.25]).to(dtype)
    got = BaseBackendMsg.decoder(UserMsg(0, t, SamplingParams()).encoder()).input_ids
    print(f"  {str(dtype):15} → {got.tolist()}  {got.dtype}  逐位相同: {torch.equal(got, t)}")

# %% [markdown]
# 坏的数据给出说得清楚的错误，而不是一个 `KeyError`：

# %%
for bad in [{"uid": 1}, {"__type__": "UserReply", "uid": 1}, {"__type__": "ExitMsg", "uid": 1}]:
    try:
        BaseBackendMsg.decoder(bad)
    except MessageDecodeError as e:
        print(f"  {type(e).__name__}: {e}")

# %% [markdown]
# ## 2. PUSH/PULL：一对一的管道
#
# 地址用 `ipc_addr(n)` 生成，形如 `ipc:///tmp/minisgl_0.pid=<启动进程的 pid>`。这里放进
# 一个临时的短目录，最后删掉。bind 的一方建 socket 文件，`stop()` 时删掉它。

# %%
workdir = tempfile.mkdtemp(prefix="msgl-", dir="/tmp")
addr = ipc_addr(0, directory=workdir)
print("地址形如:", addr.replace(workdir, "<目录>").replace(str(os.getpid()), "<pid>"))
pull = ZmqPullQueue(addr, create=True, decoder=BaseBackendMsg.decoder)
push = ZmqPushQueue(addr, create=False, encoder=BaseBackendMsg.encoder)
params = SamplingParams()
for i in range(3):
    push.put(UserMsg(uid=i, input_ids=torch.tensor([i], dtype=torch.int32), sampling_params=params))
push.put(ExitMsg())  # connect 的一方立刻就有一条管道：对方还没收，消息先排在里面
received = [pull.get() for _ in range(4)]
print("PULL 按顺序收到:", [m.uid for m in received[:3]], "然后是", type(received[3]).__name__)
print("队列已空:", pull.empty(), " socket 文件在:", os.path.exists(ipc_path(addr)))
try:
    pull.decode(b"not msgpack")
except MessageDecodeError as e:
    print("坏的帧:", e)
push.stop()
pull.stop()
print("stop() 之后 socket 文件还在吗:", os.path.exists(ipc_path(addr)))

# %% [markdown]
# ## 3. XPUB/SUB：一对多的广播
#
# 订阅要在连接建立之后才异步送到发布端。发布端以为"没人订阅"的时候发出的消息直接丢掉——
# 这就是"慢订阅者"。我们的发布端是 XPUB，能收到订阅通知，`wait_for_subscribers(n)`
# 等到 n 个订阅都生效再发。rank 0 转发的是收到的原始字节（`put_raw`），不用重新编码。

# %%
paddr = ipc_addr(1, directory=workdir)
pub = ZmqPubQueue(paddr, create=True, encoder=BaseBackendMsg.encoder)
pub.put(ExitMsg())  # 还没有任何订阅者：这一条注定丢掉
subs = [ZmqSubQueue(paddr, create=False, decoder=BaseBackendMsg.decoder) for _ in range(2)]
pub.wait_for_subscribers(2, timeout=10)
print("订阅者到齐:", pub.num_subscribers)
pub.put_raw(raw)  # 第 1 节的那条 BatchBackendMsg 的字节，原样转发
got = [s.get() for s in subs]
print("两个 SUB 收到:", [type(m).__name__ for m in got], " uid:", [m.data[0].uid for m in got])
# 先到的就是转发的那条：订阅者到来之前发的 ExitMsg 丢了，队列里也没有别的消息
print("队列已空:", [s.empty() for s in subs])
for q in [pub, *subs]:
    q.stop()
shutil.rmtree(workdir)
