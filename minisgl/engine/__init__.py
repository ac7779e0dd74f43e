"""引擎：一个 rank 上从"一批请求"到"每个请求的下一个 token"的全部机器。

- ``config``：``EngineConfig``；
- ``sample``：整批采样（贪心快路径、温度、top-k、top-p、固定种子）；
- ``graph``：decode 的 CUDA Graph 捕获与重放（只在 CUDA 上）；
- ``engine``：``Engine``，按内存预算建 KV 池，把上面几样串起来。
"""

from __future__ import annotations

from .config import DEFAULT_GRAPH_BATCH_SIZES, EngineConfig, has_weight_files
from .engine import (
    Engine,
    MemoryPlan,
    kv_bytes_per_page,
    load_dummy_model,
    plan_num_pages,
    static_generate,
)
from .graph import GraphRunner, padded_batch_size
from .sample import BatchSamplingArgs, Sampler, top_k_top_p_mask

__all__ = [
    "DEFAULT_GRAPH_BATCH_SIZES",
    "BatchSamplingArgs",
    "Engine",
    "EngineConfig",
    "GraphRunner",
    "has_weight_files",
    "MemoryPlan",
    "Sampler",
    "kv_bytes_per_page",
    "load_dummy_model",
    "padded_batch_size",
    "plan_num_pages",
    "static_generate",
    "top_k_top_p_mask",
]
