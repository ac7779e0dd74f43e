# %% [markdown]
# # 第 10 章：前缀复用——Radix Cache
#
# 很多请求的开头是一样的：同一个系统提示、同一段文档、多轮对话里之前的几轮。它们的 KV
# 也一样，没有必要每次重算。这一章把算好的 KV 页挂到一棵 radix 树上：新请求先沿树找最长的
# 已缓存前缀，只 prefill 剩下的部分；空闲页不够时，淘汰最久没用、也没人正在用的叶子。
#
# 在仓库根目录运行：`python chapters/10-radix/main.py`。

# %%
from __future__ import annotations

import os

import torch

from minisgl.core import SamplingParams
from minisgl.engine import has_weight_files
from minisgl.kvcache import RadixNode, RadixPrefixCache
from minisgl.llm import LLM
from minisgl.scheduler import PendingReq
from minisgl.utils import load_tokenizer, pick_device

MODEL = os.environ.get("MINISGL_MODEL", "models/tiny-qwen3")
device = pick_device()
# float32：不同批次组合下的输出可以逐个 token 比较（bf16 的舍入会随批大小变化）
common = dict(device=device, dtype=torch.float32, dummy_weights=not has_weight_files(MODEL))
print("设备:", device.type, " 模型:", MODEL)

# %% [markdown]
# ## 1. 一棵小树：插入、匹配时切开、加锁、淘汰
#
# 页大小 2。先缓存 `[1 2 3 4 5 6]`，再匹配 `[1 2 3 4 9 9]`：只有前 4 个相同，节点被切成
# `[1 2 3 4]` 和 `[5 6]` 两段。


# %%
def show(node: RadixNode, depth: int = 0) -> None:
    for child in node.children.values():
        print(f"{'    ' * depth}└─ {child.key} 页 {child.pages} 锁 {child.ref_count}")
        show(child, depth + 1)


tree = RadixPrefixCache(page_size=2)
tree.insert_prefix([1, 2, 3, 4, 5, 6], [10, 11, 12])
handle, pages = tree.match_prefix([1, 2, 3, 4, 9, 9])
print("匹配长度", handle.cached_len, "页", pages)
tree.insert_prefix([1, 2, 3, 4, 7, 8], [10, 11, 13])  # 前两页已经有了，只挂上 [7 8]
tree.lock(handle)
show(tree.root)
print("(可淘汰, 被锁住) 的页数:", tree.size_info)
print("淘汰 1 页:", tree.evict(1), " 再淘汰 5 页:", tree.evict(5))
tree.unlock(handle)
print("解锁后淘汰:", tree.evict(5), " 剩下", tree.size_info)
tree.check_integrity()

# %% [markdown]
# `[5 6]` 和 `[7 8]` 都没被锁，先淘汰更久没用的 `[5 6]`；`[1 2 3 4]` 被锁着，
# 解锁之前怎么也淘汰不掉。

# %% [markdown]
# ## 2. 同一个系统提示，第二个请求只算自己的那部分

# %%
tokenizer = load_tokenizer(MODEL)
system = tokenizer.encode(
    "You are a helpful assistant. Answer briefly and politely, and say so when you do not know."
)
questions = ["What is the capital of France?", "How many legs does a spider have?", "Why?"]
llm = LLM(MODEL, page_size=4, num_pages=256, max_seq_len=256, cache_type="radix", **common)
sched = llm.scheduler
params = SamplingParams(max_tokens=8, ignore_eos=True)
for uid, q in enumerate(questions):
    ids = system + tokenizer.encode(" " + q)
    sched.add_request(PendingReq(uid, torch.tensor(ids, dtype=torch.int32), params))
    batch = sched.schedule_next_batch()
    assert batch is not None
    (req,) = batch.reqs
    print(
        f"请求 {uid}：提示 {len(ids)} 个 token，命中缓存 {req.cached_len}，prefill {req.extend_len}"
    )
    sched.process(sched.forward(batch))
    while sched.has_work:
        sched.step()
    sched.check_integrity()
print("缓存里的页 (可淘汰, 被锁住):", sched.cache.prefix_cache.size_info)
llm.shutdown()

# %% [markdown]
# ## 3. radix 和 naive 的输出相同
#
# 复用前缀只是省掉重算，不改变结果。

# %%
prompts = [system + tokenizer.encode(" " + q) for q in questions] * 2
outs, prefill = {}, {}
for cache_type in ("naive", "radix"):
    llm = LLM(MODEL, page_size=4, num_pages=256, max_seq_len=256, cache_type=cache_type, **common)
    outs[cache_type] = [o.token_ids for o in llm.generate(prompts[:1], params)]
    outs[cache_type] += [o.token_ids for o in llm.generate(prompts[1:], params)]
    prefill[cache_type] = llm.scheduler.stats["prefill_tokens"]
    llm.shutdown()
print("prefill 的 token 数:", prefill)
print("radix == naive:", outs["radix"] == outs["naive"])
