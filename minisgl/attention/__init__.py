"""注意力后端：接口（``base``）、后端无关的换算（``utils``）、纯 PyTorch 的原生后端（``native``）。

后端按名字登记，命令行上的 ``--attention-backend torch`` 经 ``create_attention_backend`` 找到实现。
纯 PyTorch 的原生后端 ``torch``（文件叫 ``native.py``，免得和 torch 包重名）在任何设备上都能跑；
更快的后端（比如 GPU 上直接按页表读 KV 池的 kernel）在这里再登记一个名字，调用方不用改代码。
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from minisgl.utils import Registry

from .base import BaseAttnBackend, BaseAttnMetadata
from .native import NativeAttnBackend, NativeAttnMetadata
from .utils import cu_seqlens, make_positions, page_slots, prepare_batch

if TYPE_CHECKING:
    from minisgl.kvcache import BaseKVCachePool
    from minisgl.models.config import ModelConfig

__all__ = [
    "SUPPORTED_ATTENTION_BACKENDS",
    "BaseAttnBackend",
    "BaseAttnMetadata",
    "NativeAttnBackend",
    "NativeAttnMetadata",
    "create_attention_backend",
    "cu_seqlens",
    "make_positions",
    "page_slots",
    "prepare_batch",
]


class BackendCreator(Protocol):
    def __call__(
        self, config: ModelConfig, kv_cache: BaseKVCachePool, page_table: torch.Tensor
    ) -> BaseAttnBackend: ...


SUPPORTED_ATTENTION_BACKENDS: Registry[BackendCreator] = Registry("attention backend")


@SUPPORTED_ATTENTION_BACKENDS.register("torch")
def create_native_backend(
    config: ModelConfig, kv_cache: BaseKVCachePool, page_table: torch.Tensor
) -> BaseAttnBackend:
    # 原生后端从 q、k 的形状读出头数和 head_dim，用不到 config；GPU 后端要用它提前规划
    return NativeAttnBackend(kv_cache, page_table)


# >> ch18
from .triton_attn import TRITON_AVAILABLE, TritonAttnBackend, TritonAttnMetadata

__all__ += ["TRITON_AVAILABLE", "TritonAttnBackend", "TritonAttnMetadata"]


@SUPPORTED_ATTENTION_BACKENDS.register("triton")
def create_triton_backend(
    config: ModelConfig, kv_cache: BaseKVCachePool, page_table: torch.Tensor
) -> BaseAttnBackend:
    return TritonAttnBackend(kv_cache, page_table)


# << ch18
def create_attention_backend(
    name: str, config: ModelConfig, kv_cache: BaseKVCachePool, page_table: torch.Tensor
) -> BaseAttnBackend:
    """按名字建后端。``auto`` 选当前设备上最好的那个。"""
    if name == "auto":
        name = "torch"
        # >> ch18
        if TRITON_AVAILABLE and page_table.device.type == "cuda":  # CUDA 上装了 triton 就用它
            name = "triton"
        # << ch18
    return SUPPORTED_ATTENTION_BACKENDS.get(name)(config, kv_cache, page_table)
