"""模型共用的积木，和一个最朴素的贪心生成循环。

Llama、Qwen3（以及第 6 章的 Qwen3-MoE）的解码层由同样的两块组成：

- ``RopeAttn``：qkv 投影 → ``AttentionLayer``（q/k 归一化、RoPE、分页注意力）→ o_proj；
- ``GatedMLP``：gate_up 投影 → ``act(gate) * up`` → down 投影。

两块都是"列并行接行并行"：张量并行时中间的激活天然按段切开，整块只在最后通信一次（第 3 章）。

文件后半是 ``greedy_generate``：给一个模型和几段提示，prefill 一次、再一个 token 一个 token 地
decode，直到生成够数或遇到停止符。它是第 7 章 Engine、第 8 章调度器出现之前唯一的
生成方式，之后也一直留着，作为它们的参照答案：连续批处理、分块预填充、前缀缓存做的都是
"更快地算同一个东西"，生成的 token 必须和这个循环逐个相同。
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import torch

from minisgl.attention import page_slots, prepare_batch
from minisgl.core import Batch, Req, get_global_ctx
from minisgl.layers import (
    AttentionLayer,
    BaseOP,
    LinearColParallelMerged,
    LinearQKVMerged,
    LinearRowParallel,
    RMSNorm,
    get_act_and_mul,
)
from minisgl.utils import div_ceil

if TYPE_CHECKING:
    from .base import BaseLLMModel
    from .config import ModelConfig

__all__ = ["GatedMLP", "GenerateOutput", "RopeAttn", "greedy_generate"]


# >> ch19
from minisgl.kernel.ops import linear_silu_and_mul
from minisgl.layers import silu_and_mul


# << ch19
class GatedMLP(BaseOP):
    """``down(act(gate(x)) * up(x))``。gate、up 合成一个列并行矩阵 ``gate_up_proj``，
    激活和逐元素乘也合成一个算子（第 3 章的 ``get_act_and_mul``）。

    尺寸单独传进来而不是读 config：MoE 模型里稠密层和专家的中间维度不一样（第 6 章）。
    """

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str) -> None:
        self.gate_up_proj = LinearColParallelMerged(
            hidden_size, [intermediate_size, intermediate_size]
        )
        self.down_proj = LinearRowParallel(intermediate_size, hidden_size)
        self._act_and_mul = get_act_and_mul(hidden_act)  # 不支持的激活在建模型时就报错

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # >> ch19
        if x.is_cuda and self._act_and_mul is silu_and_mul:  # decode 时 ops 少启动一个 kernel
            gate_up = self.gate_up_proj
            return self.down_proj.forward(linear_silu_and_mul(x, gate_up.weight, gate_up.bias))

        # << ch19
        return self.down_proj.forward(self._act_and_mul(self.gate_up_proj.forward(x)))


class RopeAttn(BaseOP):
    """一层自注意力的全部权重：``qkv_proj``、（Qwen3 的）``q_norm``/``k_norm``、``o_proj``。

    中间的事交给第 4 章的 ``AttentionLayer``：它借用 q_norm、k_norm（存成下划线属性），
    所以这两个权重在状态字典里只出现一次，名字是 ``self_attn.q_norm.weight``，
    和 checkpoint 一致。``qk_norm`` 由模型类决定（Qwen3 有、Llama 没有）；
    加载器按 ``config.has_qk_norm`` 交出权重，两边对不上时严格加载会报错。
    """

    def __init__(self, config: ModelConfig, layer_id: int, *, qk_norm: bool) -> None:
        c = config
        bias = c.attention_bias  # Qwen2 这类模型的 q/k/v/o 带 bias；Llama、Qwen3 不带
        self.qkv_proj = LinearQKVMerged(
            c.hidden_size, c.head_dim, c.num_qo_heads, c.num_kv_heads, bias=bias
        )
        self.q_norm = RMSNorm(c.head_dim, c.rms_norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(c.head_dim, c.rms_norm_eps) if qk_norm else None
        self.attn = AttentionLayer(
            layer_id,
            c.num_qo_heads,
            c.num_kv_heads,
            c.head_dim,
            c.rotary_config,
            q_norm=self.q_norm,
            k_norm=self.k_norm,
        )
        self.o_proj = LinearRowParallel(c.num_qo_heads * c.head_dim, c.hidden_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv_proj.forward(x)
        return self.o_proj.forward(self.attn.forward(qkv))  # attn 原地改写 qkv，之后不再用它


# ---------------------------------------------------------------- 最朴素的贪心生成


@dataclass
class GenerateOutput:
    """``greedy_generate`` 的结果，按提示的顺序。"""

    token_ids: list[list[int]]  # 每段提示生成的 token（不含提示本身）
    # keep_logits=True 时：每段提示一个 (生成的 token 数, vocab_size) 的张量，在 CPU 上。
    # 第 k 行是生成第 k 个 token 时的 logits（第 0 行来自 prefill）
    logits: list[torch.Tensor] = field(default_factory=list)
    # 每一步（前向 + 取 argmax）的用时，单位秒；第 0 步是 prefill
    step_seconds: list[float] = field(default_factory=list)


def greedy_generate(
    model: BaseLLMModel,
    prompts: Sequence[Sequence[int] | torch.Tensor],
    max_new_tokens: int,
    *,
    stop_token_ids: Collection[int] = (),
    keep_logits: bool = False,
) -> GenerateOutput:
    """对每段提示贪心地生成最多 ``max_new_tokens`` 个 token，在全局上下文上运行。

    第一步把所有提示拼成一个 prefill 批次，之后每步一个 decode 批次，每个还没结束的请求
    各送进 1 个 token。请求生成了 ``max_new_tokens`` 个 token，或者生成了
    ``stop_token_ids`` 里的 token（它本身算在输出里）就结束，从后面的批次里拿掉。

    页的分配是最笨的：第 i 段提示占页表的第 i 行，按顺序从第 0 页开始发，每个请求一次拿够
    "提示 + 最多生成数"要的页，不回收。调用方保证页表和 KV 池此刻没有别人在用。
    第 8 章的调度器会把这件事做对：按需分配、用完回收、和别的请求共享前缀。
    """
    ctx = get_global_ctx()
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if not 0 < len(prompts) <= ctx.page_table.shape[0]:
        raise ValueError(
            f"need 1..{ctx.page_table.shape[0]} prompts (rows of the page table), "
            f"got {len(prompts)}"
        )
    page_size, next_page = ctx.page_size, 0
    reqs: list[Req] = []
    for i, prompt in enumerate(prompts):
        ids = torch.as_tensor(prompt, dtype=torch.int32).cpu().reshape(-1)
        req = Req(ids, table_idx=i, output_len=max_new_tokens, uid=i)
        length = req.max_device_len  # 提示 + 最多生成数：这一行最多要这么多个槽位
        num_pages = div_ceil(length, page_size)
        columns, free = ctx.page_table.shape[1], ctx.kv_cache.num_pages - next_page
        if length > columns or num_pages > free:
            raise ValueError(
                f"prompt {i} ({len(ids)} tokens + {max_new_tokens} new) does not fit: the page "
                f"table has {columns} columns and {free} of {ctx.kv_cache.num_pages} pages are left"
            )
        pages = range(next_page, next_page + num_pages)
        next_page += num_pages
        ctx.page_table[i, :length] = page_slots(pages, page_size, length).to(ctx.page_table.device)
        reqs.append(req)

    stop = set(stop_token_ids)
    out = GenerateOutput(token_ids=[[] for _ in reqs])
    kept: list[list[torch.Tensor]] = [[] for _ in reqs]
    running = reqs
    phase: Literal["prefill", "decode"] = "prefill"
    while running:
        start = time.perf_counter()
        batch = prepare_batch(Batch(running, phase), ctx.page_table)
        ctx.attn_backend.prepare_metadata(batch)
        with ctx.forward_batch(batch):
            logits = model.forward()  # (len(running), vocab_size)
        next_tokens = logits.argmax(dim=-1).tolist()  # 拷回主机：等这一步真正算完
        out.step_seconds.append(time.perf_counter() - start)
        for req, token, row in zip(running, next_tokens, logits):
            req.append_host(token)
            req.complete_one()  # 这一步的 K/V 进了池子；下一步只送刚生成的这 1 个 token
            out.token_ids[req.uid].append(token)
            if keep_logits:
                kept[req.uid].append(row.to("cpu", copy=True))
        running = [r for r in running if r.can_decode and out.token_ids[r.uid][-1] not in stop]
        phase = "decode"
    if keep_logits:
        out.logits = [torch.stack(rows) for rows in kept]
    return out
