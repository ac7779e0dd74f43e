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

MODEL = os.environ.get("MINISGL_MODEL", "models/demo-chat")
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
#
# 演示模型（`models/demo-chat`）会做加减法、给数字排序。每个请求都是"系统提示 + 一个问题"，
# 套上对话模板；模板的开头（系统提示、`user` 的标记）人人相同，后两个问题又都以 `What is `
# 开头。

# %%
tokenizer = load_tokenizer(MODEL)
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def chat(question: str) -> list[int]:
    """系统提示 + 一个问题，套上对话模板（第 13 章的 tokenizer 进程也是这样做的）。"""
    messages = [SYSTEM, {"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


# 问题 → 期望的回答
questions = {
    "排序：42 7 19": "7 19 42",
    "What is 1234 + 567?": "1234 + 567 = 1801",
    "What is 4321 - 987?": "4321 - 987 = 3334",
}
llm = LLM(MODEL, page_size=4, num_pages=256, max_seq_len=256, cache_type="radix", **common)
sched = llm.scheduler
params = SamplingParams(max_tokens=32)  # 遇到停止符 <|im_end|> 就结束
for uid, (q, expected) in enumerate(questions.items()):
    ids = chat(q)
    sched.add_request(PendingReq(uid, torch.tensor(ids, dtype=torch.int32), params))
    batch = sched.schedule_next_batch()
    assert batch is not None
    (req,) = batch.reqs
    print(
        f"请求 {uid}：提示 {len(ids)} 个 token，命中缓存 {req.cached_len}，prefill {req.extend_len}"
    )
    answer = [o.token for o in sched.process(sched.forward(batch))]
    while sched.has_work:
        answer += [o.token for o in sched.step()]
    sched.check_integrity()
    text = tokenizer.decode(answer, skip_special_tokens=True)
    print(f"    {q!r} → {text!r}（期望 {expected!r}）")
print("缓存里的页 (可淘汰, 被锁住):", sched.cache.prefix_cache.size_info)
llm.shutdown()

# %% [markdown]
# 请求 1 和请求 0 的前 14 个 token 相同（系统提示和 `<|im_start|>user\n`），按 4 个一页对齐，
# 复用 12 个；请求 2 和请求 1 还多相同 `What is `，复用 16 个。不满一页的零头要重算。命中多少，
# 回答都和期望的一样。

# %% [markdown]
# ## 3. radix 和 naive 的输出相同
#
# 复用前缀只是省掉重算，不改变结果。

# %%
prompts = [chat(q) for q in questions] * 2
outs, prefill = {}, {}
for cache_type in ("naive", "radix"):
    llm = LLM(MODEL, page_size=4, num_pages=256, max_seq_len=256, cache_type=cache_type, **common)
    outs[cache_type] = [o.token_ids for o in llm.generate(prompts[:1], params)]
    outs[cache_type] += [o.token_ids for o in llm.generate(prompts[1:], params)]
    prefill[cache_type] = llm.scheduler.stats["prefill_tokens"]
    llm.shutdown()
print("prefill 的 token 数:", prefill)
print("radix == naive:", outs["radix"] == outs["naive"])
print("回答:", [tokenizer.decode(t, skip_special_tokens=True) for t in outs["radix"][:3]])
