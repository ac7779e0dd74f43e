"""层（算子层）：模型由这些积木搭成。

每个层都是 ``BaseOP``：权重是挂在属性上的普通张量，按带点的名字列出和严格加载；
真正的计算交给 ``minisgl.kernel``。张量并行的切分已经体现在权重形状里，
需要通信的层（行并行线性层、词表并行 embedding、LM head）各持有一个通信器。
"""

from __future__ import annotations

from .activation import gelu_and_mul, gelu_tanh_and_mul, get_act_and_mul, silu_and_mul
from .base import BaseOP, OPList, StateDictError
from .embedding import ParallelLMHead, VocabParallelEmbedding
from .linear import LinearColParallelMerged, LinearQKVMerged, LinearReplicated, LinearRowParallel
from .norm import RMSNorm, RMSNormFused
from .rotary import RotaryEmbedding, get_rope, rope_inv_freq

__all__ = [
    "BaseOP",
    "LinearColParallelMerged",
    "LinearQKVMerged",
    "LinearReplicated",
    "LinearRowParallel",
    "OPList",
    "ParallelLMHead",
    "RMSNorm",
    "RMSNormFused",
    "RotaryEmbedding",
    "StateDictError",
    "VocabParallelEmbedding",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "get_act_and_mul",
    "get_rope",
    "rope_inv_freq",
    "silu_and_mul",
]

# >> ch04
from .attention import AttentionLayer

__all__ += ["AttentionLayer"]
# << ch04
