# %% [markdown]
# # 第 6 章：放大模型——张量并行（CPU gloo）与 MoE
#
# 模型放大有两条路，这一章各走一遍：
#
# - **MoE**：一层里放很多个专家 MLP，每个 token 只用其中几个。我们给 Qwen3-MoE 写路由和专家计算，
#   和 transformers 逐步对照；
# - **张量并行**：把每个权重矩阵切给几个进程（rank），每个 rank 只存、只算自己那一片，
#   在几处 all_reduce / all_gather 把结果拼回来。没有 GPU 也能跑：用 gloo 在 CPU 进程之间通信。
#   tp=2 必须和 tp=1 生成同样的 token。张量并行用的稠密模型默认是第 5 章的演示模型
#   `models/demo-chat`（为这本书训练的小聊天模型，会算加减法、排序、倒序、复述），
#   所以切成两片以后它还得答对问题——答错了就是切分或通信出了 bug。
#
# 在仓库根目录运行：`python chapters/06-scale/main.py`。有 2 块以上 GPU 时各 rank 各用一块、
# 用 NCCL 通信；只有 1 块 GPU 或没有 GPU 时，rank 都在 CPU 上、用 gloo 通信。
# 环境变量 `MINISGL_TP` 改 rank 数（默认 2），`MINISGL_MODEL` 换张量并行用的稠密模型。

# %%
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import torch
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.utils.logging import disable_progress_bar

from minisgl.distributed import reset_tp_info, set_tp_info, spawn_ranks
from minisgl.models import (
    ModelConfig,
    create_model,
    generate_in_new_context,
    load_and_generate,
    load_model,
)
from minisgl.moe.native import group_by_expert, select_experts
from minisgl.utils import load_tokenizer, pick_device

DENSE = os.environ.get("MINISGL_MODEL", "models/demo-chat")
MOE = "models/tiny-qwen3-moe"
TP = int(os.environ.get("MINISGL_TP", "2"))
device = pick_device()
tokenizer = load_tokenizer(MOE)  # 几个内嵌模型用的是同一套 Qwen 词表和聊天模板
# MoE 模型的权重是随机的，只用来对照计算：给它两段普通文本
prompts = [
    tokenizer.encode("The capital of France is"),
    tokenizer.encode("1, 2, 3, 4,"),
]
# 稠密模型是会答题的演示模型：给它两个用聊天模板包好的问题，以及演示模型的标准答案
QUESTIONS = [("What is 1234 + 567?", "1234 + 567 = 1801"), ("倒过来：3 14 15 92", "92 15 14 3")]
chat_prompts = [
    tokenizer.encode(
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
        ),
        add_special_tokens=False,
    )
    for q, _ in QUESTIONS
]
print("设备:", device.type, " MoE 的两段提示:", prompts)
print("稠密模型的两个问题:", [q for q, _ in QUESTIONS], "提示长度", [len(p) for p in chat_prompts])


def answer_text(token_ids: list[int]) -> str:
    """生成的 token 截到第一个结束符（<|im_end|>）为止，解码成文字。"""
    if tokenizer.eos_token_id in token_ids:
        token_ids = token_ids[: token_ids.index(tokenizer.eos_token_id)]
    return tokenizer.decode(token_ids)


# %% [markdown]
# ## 1. 一层 MoE 里发生了什么
#
# tiny-qwen3-moe 每层有 4 个专家，每个 token 选 2 个（`num_experts_per_tok`），选出的两个权重
# 重新归一化到和为 1（`norm_topk_prob`）。我们在第 0 层的专家上装一个"探头"，prefill 第一段
# 提示，记下路由器的打分，再用本章的 `select_experts`、`group_by_expert` 看看路由的结果。

# %%
config = ModelConfig.from_pretrained(MOE)
print(
    f"{config.architecture}：{config.num_experts} 个专家，"
    f"每个 token 选 {config.num_experts_per_tok} 个，"
    f"专家的中间维度 {config.moe_intermediate_size}，重新归一化 {config.norm_topk_prob}"
)

moe_model = load_model(MOE, device=device, dtype=torch.float32)
experts = moe_model.model.layers[0].mlp.experts
captured: dict[str, torch.Tensor] = {}


def probe(x: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
    """探头：记下路由器的打分，再照常计算。"""
    captured.setdefault("logits", router_logits.float().cpu())
    return type(experts).forward(experts, x, router_logits)


experts.forward = probe  # 实例属性盖住类里的方法（不是张量，不进状态字典）
generate_in_new_context(moe_model, prompts[:1], 1)  # prefill 一次就够了
del experts.forward  # 拆掉探头
weights, ids = select_experts(captured["logits"], config.num_experts_per_tok, config.norm_topk_prob)
for t, token in enumerate(prompts[0]):
    chosen = "  ".join(f"专家 {e}×{w:.3f}" for e, w in zip(ids[t].tolist(), weights[t].tolist()))
    print(f"  token {t} {tokenizer.decode([token])!r:10s} → {chosen}")
order, counts = group_by_expert(ids, config.num_experts)
print("每个专家分到的 token 数:", counts.tolist())
start = 0
for e, n in enumerate(counts.tolist()):
    print(f"  专家 {e} 的一组：token {(order[start : start + n] // ids.shape[1]).tolist()}")
    start += n

# %% [markdown]
# ## 2. 和 transformers 对照
#
# 整个 Qwen3-MoE 模型贪心生成 16 个 token，每一步和 transformers 自己的贪心生成比较 logits 与
# 选出的 token。near-tie（第一名只领先第二名不到 1e-3）时停止比较 token：两边各有 1e-5 量级的
# 浮点误差，谁排第一都说得过去。

# %%
STEPS = 16
ours = generate_in_new_context(moe_model, prompts, STEPS)
hf = AutoModelForCausalLM.from_pretrained(MOE, dtype=torch.float32).to(device).eval()
for i, prompt in enumerate(prompts):
    with torch.no_grad():
        want = hf.generate(
            torch.tensor([prompt], device=device),
            max_new_tokens=STEPS,
            do_sample=False,
            eos_token_id=None,  # 生成到结束符也不停，和 greedy_generate 一样
            pad_token_id=0,
            output_logits=True,
            return_dict_in_generate=True,
        )
    want_logits = torch.cat(want.logits).float().cpu()
    want_tokens = want.sequences[0, len(prompt) :].tolist()
    worst = (ours.logits[i] - want_logits).abs().max().item()
    compared = 0
    for k in range(STEPS):
        top2 = want_logits[k].topk(2).values
        if top2[0] - top2[1] <= 1e-3 or ours.token_ids[i][k] != want_tokens[k]:
            break
        compared += 1
    print(
        f"提示 {i}：{compared}/{STEPS} 个 token 与 transformers 相同，logits 最大误差 {worst:.1e}"
    )
    print("   ", ours.token_ids[i])

# %% [markdown]
# ## 3. 张量并行：每个 rank 拿哪一片
#
# 切分规则在第 2 章的加载器和第 3 章的层里已经写好了，这里只是换个 TP 信息、在 meta 设备上建模型，
# 看看每个 rank 的权重形状（不分配内存、不读文件）。demo-chat 有 4 个 Q 头、2 个 KV 头：
# tp=4 时每个 rank 1 个 Q 头，KV 头不够分，相邻两个 rank 共用一个 KV 头的副本。


# %%
def local_shapes(path: str, rank: int, tp: int) -> dict[str, tuple[int, ...]]:
    reset_tp_info()
    set_tp_info(rank, tp)
    try:
        with torch.device("meta"):
            model = create_model(ModelConfig.from_pretrained(path))
        return {k: tuple(v.shape) for k, v in model.state_dict().items()}
    finally:
        reset_tp_info()


KEYS = {
    "qkv_proj": "model.layers.0.self_attn.qkv_proj.weight",
    "o_proj": "model.layers.0.self_attn.o_proj.weight",
    "gate_up_proj": "model.layers.0.mlp.gate_up_proj.weight",
    "down_proj": "model.layers.0.mlp.down_proj.weight",
    "embed_tokens": "model.embed_tokens.weight",
}
print(f"{Path(DENSE).name} 每个 rank 上的形状：")
print(f"{'':6s}" + "".join(f"{k:>16s}" for k in KEYS))
for tp in (1, 2, 4):
    shapes = local_shapes(DENSE, 0, tp)
    print(f"{f'tp={tp}':6s}" + "".join(f"{str(shapes[v]):>16s}" for v in KEYS.values()))
num_kv = ModelConfig.from_pretrained(DENSE).num_kv_heads
print("tp=4 时各 rank 的 KV 头:", [r * num_kv // 4 for r in range(4)])
moe_shapes = local_shapes(MOE, 1, 2)
print("tiny-qwen3-moe，tp=2 的 rank 1:")
for name in ("gate.weight", "experts.gate_up_proj", "experts.down_proj"):
    print(f"  mlp.{name:22s}{moe_shapes['model.layers.0.mlp.' + name]}")

# %% [markdown]
# ## 4. 起 2 个进程
#
# `spawn_ranks(fn, 2, args)` 起 2 个 Python 进程，每个先加入进程组（gloo 或 NCCL），再运行
# `fn(*args)`——这里是 `load_and_generate`：加载**本 rank 的那一片**权重，建自己的 KV 池，
# 贪心生成。每一层里行并行的线性层、MoE 层各 all_reduce 一次，LM head all_gather 一次；
# 最后每个 rank 都拿到同样的 logits。把它们和 tp=1（就在本进程里算）比较。
#
# 稠密模型生成的是两个问题的答案，把 tp=2 的答案和标准答案并排打印出来；MoE 模型的权重
# 是随机的，只比较 token。
#
# 误差看相对值：各 rank 先算各自那一片的部分和，all_reduce 再相加，加法的顺序和 tp=1 不同，
# float32 的舍入误差和 logits 的大小成正比。token 也可能因此不同——只当分歧处 tp=1 的第一名
# 和第二名几乎一样大（near-tie）时才说得过去，所以分歧时把那一步的差距打印出来。

# %%
if device.type == "cuda" and torch.cuda.device_count() >= TP:
    rank_device, ref_device = "cuda", device
    print(f"{torch.cuda.device_count()} 块 GPU：{TP} 个 rank 每个一块，用 NCCL 通信")
else:
    rank_device, ref_device = "cpu", torch.device("cpu")
    if device.type == "cuda":
        print(f"GPU 不够 {TP} 块：NCCL 要求每个 rank 各有一块 GPU，")
        print(f"所以 {TP} 个 rank 和 tp=1 的参照都放在 CPU 上，用 gloo 通信")
    else:
        print(f"没有 GPU：{TP} 个 rank 都在 CPU 上，用 gloo 通信")

dense_path, scratch = DENSE, None
if not any(Path(DENSE).glob("*.safetensors")):  # 只有配置的 qwen3-0.6b-shape：按配置随机初始化
    scratch = tempfile.mkdtemp(prefix="m06-", dir="/tmp")
    torch.manual_seed(0)
    disable_progress_bar()  # 不要"Writing model shards"进度条
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(DENSE)).save_pretrained(scratch)
    dense_path = scratch
    print(f"{DENSE} 没有权重：用 transformers 按它的配置随机初始化一份（seed 0）")

for name, path, model_prompts in ((DENSE, dense_path, chat_prompts), (MOE, MOE, prompts)):
    ref = load_and_generate(path, model_prompts, STEPS, device=ref_device)
    start = time.perf_counter()
    outs = spawn_ranks(load_and_generate, TP, (path, model_prompts, STEPS), device=rank_device)
    elapsed = time.perf_counter() - start
    diff = max((a - b).abs().max().item() for a, b in zip(outs[0].logits, ref.logits))
    scale = max(r.abs().max().item() for r in ref.logits)
    same = all(out.token_ids == ref.token_ids for out in outs)
    ranks_agree = all(
        torch.equal(a, b) for out in outs[1:] for a, b in zip(outs[0].logits, out.logits)
    )
    print(f"{name}：{TP} 个 rank 从启动到结束 {elapsed:.1f} s")
    print(f"  tp={TP} 与 tp=1 的 token 相同：{same}")
    print(
        f"  logits 最大误差 {diff:.1e}，logits 最大绝对值 {scale:.1f}，"
        f"相对误差 < 1e-5：{diff < 1e-5 * scale}"
    )
    for i, (got, want) in enumerate(zip(outs[0].token_ids, ref.token_ids)):
        k = next((k for k in range(STEPS) if got[k] != want[k]), None)
        if k is not None:
            top2 = ref.logits[i][k].topk(2).values
            print(f"  提示 {i} 在第 {k} 步分歧：tp=1 第一名只领先 {top2[0] - top2[1]:.1e}")
    print(f"  {TP} 个 rank 的 logits 逐位相同：{ranks_agree}")
    if model_prompts is prompts:  # MoE：随机权重，只看 token
        print(f"  tp={TP} 生成的 token:", outs[0].token_ids)
        continue
    # 标准答案只对演示模型成立；MINISGL_MODEL 换成别的模型时只看它怎么答
    demo = Path(DENSE).name == "demo-chat"
    for (question, expected), got in zip(QUESTIONS, outs[0].token_ids):
        answer = answer_text(got)
        right = "对" if answer == expected else "错"
        check = f"（标准答案 {expected}，{right}）" if demo else ""
        print(f"  问 {question!r} → tp={TP} 答 {answer!r}{check}")
if scratch:
    shutil.rmtree(scratch)

# %% [markdown]
# ## 5. 出错时不会卡住
#
# 演示模型的 4 个 Q 头分不成 3 份：tp=3 时每个 rank 在建模型时就报错。`spawn_ranks` 发现
# 有 rank 失败，立刻杀掉其余的 rank，把 traceback 交给我们——不会有哪个 rank 卡在等别人的
# all_reduce 里。

# %%
try:
    spawn_ranks(load_and_generate, 3, (DENSE, chat_prompts, 4))
except RuntimeError as e:
    print("tp=3 失败了：", str(e).strip().splitlines()[-1])
print("还有没退出的子进程吗:", psutil.Process().children(recursive=True))
