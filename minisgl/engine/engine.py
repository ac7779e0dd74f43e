"""Engine：一个 rank 上的"前向机器"。

它拥有一次前向需要的全部东西，并在构造时按顺序建好::

    设备、dtype → 模型（加载之后量一次空闲内存；权重的大小直接数出来）
      → 按内存预算算出 KV 池的页数 → KV 池 + 页表 + 注意力后端 → 全局 Context
      → 采样器 → CUDA Graph（只在 CUDA 上）

之后它只做一件事：``forward_batch(batch)``——算这一批的 logits，采样出每个请求的下一个
token。哪些请求进批次、页怎么分配，是第 8 章调度器的事，Engine 不管。
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from minisgl.attention import create_attention_backend, page_slots, prepare_batch
from minisgl.core import Batch, Context, Req, SamplingParams, reset_global_ctx, set_global_ctx
from minisgl.distributed import get_tp_info
from minisgl.kvcache import create_kvcache_pool
from minisgl.models import ModelConfig, create_model, load_model
from minisgl.utils import (
    default_dtype,
    div_ceil,
    div_even,
    format_bytes,
    init_logger,
    memory_info,
    pick_device,
    synchronize,
    torch_dtype,
)

from .config import EngineConfig
from .graph import GraphRunner
from .sample import BatchSamplingArgs, Sampler

if TYPE_CHECKING:
    from minisgl.models.base import BaseLLMModel

# >> ch14
from dataclasses import replace

import torch.distributed as dist

from minisgl.distributed import cpu_group

# << ch14
__all__ = [
    "Engine",
    "MemoryPlan",
    "kv_bytes_per_page",
    "load_dummy_model",
    "plan_num_pages",
    "static_generate",
]

logger = init_logger(__name__)


def kv_bytes_per_page(
    num_layers: int, num_kv_heads: int, head_dim: int, page_size: int, dtype: torch.dtype
) -> int:
    """一页 KV 占多少字节：K 和 V 两份 × 层数 × 页内 token 数 × 本 rank 的 KV 头 × head_dim。"""
    itemsize = torch.empty((), dtype=dtype).element_size()
    return 2 * num_layers * page_size * num_kv_heads * head_dim * itemsize


@dataclass(frozen=True)
class MemoryPlan:
    """页数是怎么算出来的：main 把它打印出来，测试检查其中的算术。"""

    num_pages: int
    bytes_per_page: int
    available: int  # 可以给 KV 池的字节数（给了页数时为 0）
    source: str  # "num_pages" | "memory_budget" | "memory_fraction"
    capped: bool  # 是否被"页表最多用得到的页数"截断

    @property
    def kv_bytes(self) -> int:
        return self.num_pages * self.bytes_per_page


def plan_num_pages(
    *,
    free: int,
    total: int,
    bytes_per_page: int,
    memory_fraction: float,
    memory_budget: int | None = None,
    num_pages: int | None = None,
    max_useful_pages: int | None = None,
) -> MemoryPlan:
    """按三种说法之一算 KV 池的页数（优先级从高到低）：

    1. ``num_pages``：直接给；
    2. ``memory_budget``：KV 池最多用这么多字节（但不超过此刻的空闲内存）；
    3. ``memory_fraction``：整个进程最多用掉总内存的这个比例。``free`` 是加载模型**之后**
       的空闲量，模型已经不在里面了；再留出 ``(1 - fraction) * total`` 给激活、CUDA Graph、
       别的进程，剩下的都给 KV 池。

    页表一共只有 ``max_useful_pages`` 页的格子，多开的页永远用不到，所以按它截断——
    CPU 上"可用内存"往往是几十 GB，不截断的话一个小模型也会把内存吃光。
    """
    if bytes_per_page <= 0:
        raise ValueError(f"bytes_per_page must be > 0, got {bytes_per_page}")
    if num_pages is not None:
        return MemoryPlan(num_pages, bytes_per_page, 0, "num_pages", False)
    if memory_budget is not None:
        available, source = min(memory_budget, free), "memory_budget"
    else:
        available, source = free - math.ceil((1.0 - memory_fraction) * total), "memory_fraction"
    pages = max(available, 0) // bytes_per_page
    if pages < 1:
        raise RuntimeError(
            f"not enough memory for the KV cache: {format_bytes(max(available, 0))} available "
            f"({source}; free {format_bytes(free)} of {format_bytes(total)}), one page needs "
            f"{format_bytes(bytes_per_page)}; lower the model size or set num_pages"
        )
    capped = max_useful_pages is not None and pages > max_useful_pages
    if capped:
        assert max_useful_pages is not None
        pages = max_useful_pages
    return MemoryPlan(pages, bytes_per_page, available, source, capped)


def load_dummy_model(
    model_path: str, device: torch.device, dtype: torch.dtype, seed: int = 0
) -> BaseLLMModel:
    """只读 config.json，权重填随机数：norm 的权重是 1，其余是 N(0, 0.02)。

    在没有权重文件的机器上（本书的 GPU 机器不联网）用真实的形状测速度、量显存；
    生成的文字没有意义。张量并行时每个 rank 只填自己那一份。
    """
    config = ModelConfig.from_pretrained(model_path)
    with torch.device("meta"), torch_dtype(dtype):
        model = create_model(config)
    generator = torch.Generator(device=device).manual_seed(seed)
    weights: dict[str, torch.Tensor] = {}
    for name, meta in model.state_dict().items():
        w = torch.empty(meta.shape, dtype=dtype, device=device)
        if name.endswith("norm.weight"):
            w.fill_(1.0)
        else:
            w.normal_(0.0, 0.02, generator=generator)
        weights[name] = w
    model.load_state_dict(weights)
    return model


class Engine:
    """一个 rank 的模型、KV 池、页表、注意力后端和采样器。构造时把 Context 设为全局的。"""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.device = pick_device(config.device)
        self.dtype = config.dtype or default_dtype(self.device)
        self.tp_info = get_tp_info()

        # 1. 模型。加载之后再量空闲内存：权重已经不在"空闲"里了
        if config.dummy_weights:
            self.model = load_dummy_model(str(config.model_path), self.device, self.dtype)
        else:
            self.model = load_model(config.model_path, device=self.device, dtype=self.dtype)
        synchronize(self.device)
        free_after, total = memory_info(self.device)
        # 权重的大小直接数出来：CPU 上前后两次测量之差被别的进程的波动淹没，不可靠。
        # 按存储去重：词表共享（tie_word_embeddings）时 embedding 和 LM head 是同一块内存
        storages = {t.untyped_storage().data_ptr(): t for t in self.model.state_dict().values()}
        self.model_bytes = sum(t.untyped_storage().nbytes() for t in storages.values())
        model_config = self.model.config

        # 2. 页表的形状：每个同时运行的请求一行，每行能放一个最长的序列
        self.max_seq_len = config.max_seq_len or model_config.rotary_config.max_position
        self.page_size = config.page_size
        columns = div_ceil(self.max_seq_len, self.page_size) * self.page_size

        # 3. KV 池的页数
        local_kv_heads = div_even(
            model_config.num_kv_heads, self.tp_info.size, allow_replicate=True
        )
        per_page = kv_bytes_per_page(
            model_config.num_layers,
            local_kv_heads,
            model_config.head_dim,
            self.page_size,
            self.dtype,
        )
        self.memory_plan = plan_num_pages(
            free=free_after,
            total=total,
            bytes_per_page=per_page,
            memory_fraction=config.memory_fraction,
            memory_budget=config.memory_budget,
            num_pages=config.num_pages,
            max_useful_pages=config.max_running_reqs * columns // self.page_size,
        )
        # >> ch14
        if self.tp_info.size > 1:  # 各 rank 的空闲内存不同：都取最小的页数，调度决策才会一致
            pages = torch.tensor([self.memory_plan.num_pages], dtype=torch.int64)
            dist.all_reduce(pages, op=dist.ReduceOp.MIN, group=cpu_group())
            self.memory_plan = replace(self.memory_plan, num_pages=int(pages.item()))
        # << ch14
        self.num_pages = self.memory_plan.num_pages
        # 多开一页"哑页"放在最后：CUDA Graph 补齐出来的假请求把 K/V 写到这里，不碰真请求的页
        self.dummy_page = self.num_pages
        self.kv_cache = create_kvcache_pool(
            model_config, self.num_pages + 1, self.page_size, self.dtype, self.device
        )
        self.page_table = torch.zeros(
            config.max_running_reqs, columns, dtype=torch.int32, device=self.device
        )
        self.attn_backend = create_attention_backend(
            config.attention_backend, model_config, self.kv_cache, self.page_table
        )
        self.ctx = Context(
            page_table=self.page_table, kv_cache=self.kv_cache, attn_backend=self.attn_backend
        )
        reset_global_ctx()  # 一个进程只有一个 Engine：新建的覆盖旧的
        set_global_ctx(self.ctx)

        # 4. 采样器和 CUDA Graph
        self.sampler = Sampler(self.device, config.seed)
        self.graph_runner = GraphRunner(
            self.model,
            self.ctx,
            batch_sizes=config.cuda_graph_batch_sizes if config.use_cuda_graph else (),
            device=self.device,
            dummy_page=self.dummy_page,
        )
        # >> ch19
        from minisgl.kernel.ops import warm_up_token_counts

        from .prefill_graph import PrefillGraphRunner, prefill_graph_token_counts

        max_prefill = (config.cuda_graph_prefill_tokens or 0) if config.use_cuda_graph else 0
        self.prefill_graphs = PrefillGraphRunner(
            self.model,
            self.ctx,
            token_counts=prefill_graph_token_counts(max_prefill),
            device=self.device,
            dummy_page=self.dummy_page,
        )
        self.warm_up_prefill(warm_up_token_counts(self.device))
        # << ch19
        logger.info(
            f"engine ready on {self.device}: model {format_bytes(self.model_bytes)}, "
            f"KV cache {self.num_pages} pages x {self.page_size} tokens = "
            f"{format_bytes(self.memory_plan.kv_bytes)} ({self.memory_plan.source}), "
            f"cuda graph {self.graph_runner.describe()}"
        )

    @property
    def vocab_size(self) -> int:
        return self.model.config.vocab_size

    def sampling_args(self, batch: Batch) -> BatchSamplingArgs:
        return BatchSamplingArgs.from_params(
            [r.sampling_params for r in batch.reqs],
            self.vocab_size,
            self.device,
            # >> ch16
            positions=[r.device_len for r in batch.reqs],
            # << ch16
        )

    def forward_logits(self, batch: Batch) -> torch.Tensor:
        """这一批每个请求的 logits ``(bs, vocab)``。``batch`` 的 input_ids、positions、out_loc
        已经填好（``attention.prepare_batch``）；元数据在这里算。能用 CUDA Graph 就重放。"""
        if self.graph_runner.can_run(batch):
            return self.graph_runner.replay(batch)
        # >> ch19
        if self.prefill_graphs.can_run(batch):
            return self.prefill_graphs.replay(batch)
        # << ch19
        self.attn_backend.prepare_metadata(batch)
        with self.ctx.forward_batch(batch):
            return self.model.forward()

    def forward_batch(self, batch: Batch, args: BatchSamplingArgs | None = None) -> torch.Tensor:
        """前向 + 采样：返回 ``(bs,)`` int64 的下一个 token，在设备上（拷回主机由调用方决定，
        第 11 章的重叠调度就靠"不马上拷回"）。``args`` 省略时按批次里请求的采样参数现算。"""
        logits = self.forward_logits(batch)
        return self.sampler.sample(logits, args if args is not None else self.sampling_args(batch))

    # >> ch19
    def warm_up_prefill(self, token_counts: Sequence[int]) -> None:
        """每个 token 数各跑一次只有一个假请求的 prefill，让 Triton 在启动时编译图外的 kernel
        （图外不开依赖启动，和图里的是两组编译），而不是服务中途让那一步停几百毫秒；decode 的各档
        在捕获 CUDA Graph 时已经跑过。假请求用页表第 0 行（还没有请求，全是 0：只读不写），
        K/V 全写进哑页。比页表一行还长的 token 数，服务里也不会有，跳过。"""
        for n in token_counts:
            if n > self.page_table.shape[1]:
                continue
            batch = Batch([Req(torch.zeros(n, dtype=torch.int32), table_idx=0)], "prefill")
            batch.input_ids = torch.zeros(n, dtype=torch.int32, device=self.device)
            batch.positions = torch.arange(n, dtype=torch.int32, device=self.device)
            slot = self.graph_runner.dummy_slot  # 哑页的第一个槽位，和补齐的假请求写同一处
            batch.out_loc = torch.full((n,), slot, dtype=torch.int32, device=self.device)
            self.forward_logits(batch)
        synchronize(self.device)

    # << ch19
    def shutdown(self) -> None:
        """放开全局上下文和 CUDA Graph。"""
        self.graph_runner.destroy()
        # >> ch19
        self.prefill_graphs.destroy()
        # << ch19
        reset_global_ctx()


def static_generate(
    engine: Engine,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    params: Sequence[SamplingParams] | SamplingParams | None = None,
) -> list[list[int]]:
    """用 Engine 把几段提示各生成 ``max_new_tokens`` 个 token（不看停止符）。

    和第 5 章的 ``greedy_generate`` 一样是"静态"的：第 i 段提示占页表第 i 行，一次拿够页，
    所有请求同进同出。区别是每一步都走 ``engine.forward_batch``——元数据、CUDA Graph、
    按请求的采样参数都在里面。真正的服务用调度器；这个函数给 Engine 自己的测试和演示用。
    """
    if not 0 < len(prompts) <= engine.page_table.shape[0]:
        raise ValueError(f"need 1..{engine.page_table.shape[0]} prompts, got {len(prompts)}")
    if params is None or isinstance(params, SamplingParams):
        params = [params or SamplingParams()] * len(prompts)
    page_size, next_page = engine.page_size, 0
    reqs: list[Req] = []
    for i, (prompt, p) in enumerate(zip(prompts, params)):
        ids = torch.as_tensor(prompt, dtype=torch.int32).cpu().reshape(-1)
        req = Req(ids, table_idx=i, output_len=max_new_tokens, uid=i, sampling_params=p)
        num_pages = div_ceil(req.max_device_len, page_size)
        too_long = req.max_device_len > engine.page_table.shape[1]
        if too_long or next_page + num_pages > engine.num_pages:
            raise ValueError(f"prompt {i} does not fit in the page table / KV cache")
        pages = range(next_page, next_page + num_pages)
        next_page += num_pages
        slots = page_slots(pages, page_size, req.max_device_len).to(engine.device)
        engine.page_table[i, : req.max_device_len] = slots
        reqs.append(req)
    running, phase = reqs, "prefill"
    while running:
        batch = prepare_batch(Batch(running, phase), engine.page_table)  # type: ignore[arg-type]
        tokens = engine.forward_batch(batch).tolist()  # 拷回主机：下一步的输入要用
        for req, token in zip(running, tokens):
            req.append_host(token)
            req.complete_one()
        running, phase = [r for r in running if r.can_decode], "decode"
    return [r.output_ids for r in reqs]
