"""算子（kernel）：层和模型里所有"真正算数"的地方都调用这里导出的函数。

现在只有一个纯 PyTorch 的实现（``ops.py``），在 CPU、MPS、CUDA 上都能跑。后面的章节往
``ops.py`` 里加 KV 缓存的写入、前缀比较；第四阶段用 Triton 写的快速版本也从这里接入，
调用方不用改。
"""

from __future__ import annotations

from .ops import (
    apply_rope_inplace,
    fused_add_rmsnorm,
    gelu_and_mul,
    indexing,
    # >> ch19
    qk_norm_rope_inplace,
    qk_norm_rope_store,
    # << ch19
    rmsnorm,
    silu_and_mul,
)

__all__ = [
    "apply_rope_inplace",
    "fused_add_rmsnorm",
    "gelu_and_mul",
    "indexing",
    # >> ch19
    "qk_norm_rope_inplace",
    "qk_norm_rope_store",
    # << ch19
    "rmsnorm",
    "silu_and_mul",
]

# >> ch04
from .ops import store_cache

__all__ += ["store_cache"]
# << ch04
