"""词表并行的 embedding 和 LM head。

词表很大（Qwen3 是 151936 个 token），embedding 矩阵和 LM head 往往是模型里最大的两个矩阵，
所以按词表的行切给各个 rank：每个 rank 持有 ``ceil(V / tp)`` 行。V 不能被 tp 整除时，
最后一个 rank 的末尾几行是补出来的空行（加载器填 0），对应的 token id 永远不会出现。

- embedding：每个 rank 只查得到自己那段词表里的 token，查不到的输出 0；``all_reduce`` 相加之后
  每个 token 恰好取到它所在 rank 的那一行。
- LM head：每个 rank 算出自己那段词表的 logits，``all_gather`` 按 rank 顺序拼起来，
  再切掉补齐的尾巴，得到 ``(请求数, V)``。
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minisgl.distributed import DistributedCommunicator, get_tp_info
from minisgl.kernel import indexing
from minisgl.utils import div_ceil

from .base import BaseOP

__all__ = ["ParallelLMHead", "VocabParallelEmbedding"]


class VocabParallelEmbedding(BaseOP):
    """``(N,)`` 个 token id → ``(N, hidden)``。``weight`` 是本 rank 的 ``ceil(V / tp)`` 行。"""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        info = get_tp_info()
        self.num_embeddings = num_embeddings
        self.num_embeddings_local = div_ceil(num_embeddings, info.size)
        # 词表很小而 rank 很多时（V=5、tp=4），最后的 rank 一个真 token 也没有：区间为空
        start = min(info.rank * self.num_embeddings_local, num_embeddings)
        end = min(start + self.num_embeddings_local, num_embeddings)
        self.vocab_range = (start, end)  # 本 rank 负责的 token id：[start, end)
        self.weight = torch.empty(self.num_embeddings_local, embedding_dim)
        self._comm = DistributedCommunicator(info)

    def forward_local(self, ids: torch.Tensor) -> torch.Tensor:
        """本 rank 的部分结果：自己那段词表里的 token 查表，其余的行是 0。"""
        vocab_range = self.vocab_range if self._comm.size > 1 else None
        return indexing(self.weight, ids, vocab_range=vocab_range)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self._comm.all_reduce(self.forward_local(ids))


class ParallelLMHead(BaseOP):
    """最后一层的隐状态 → 词表上的 logits，只为每个请求的**最后一个 token** 算。

    prefill 时一个请求的几百个 token 都走完了整个模型，但只有最后一个 token 的 logits 用来采样。
    ``forward(x, last_indices)`` 先挑出这些行，再做 ``(请求数, hidden) @ (hidden, V)``——
    省掉的是整个模型里最大的一次矩阵乘。

    ``tied_embedding`` 不为 None 时与 embedding 共享权重（小模型常见，Qwen3-0.6B 就是）：本层
    没有自己的 ``weight``，状态字典里也就没有 ``lm_head.weight``。
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        bias: bool = False,
        tied_embedding: VocabParallelEmbedding | None = None,
    ) -> None:
        info = get_tp_info()
        self.num_embeddings = num_embeddings
        self.num_embeddings_local = div_ceil(num_embeddings, info.size)
        # 下划线开头：不是本层的状态，加载时不碰它（它的权重属于 embed_tokens）
        self._tied = tied_embedding
        if tied_embedding is None:
            self.weight = torch.empty(self.num_embeddings_local, embedding_dim)
        self.bias = torch.empty(self.num_embeddings_local) if bias else None
        self._comm = DistributedCommunicator(info)

    @property
    def local_weight(self) -> torch.Tensor:
        return self._tied.weight if self._tied is not None else self.weight

    def forward_local(
        self, x: torch.Tensor, last_indices: torch.Tensor | None = None
    ) -> torch.Tensor:
        """本 rank 那段词表（含补齐的空行）的 logits：``(n, ceil(V / tp))``。"""
        if last_indices is not None:
            x = x[last_indices]
        return F.linear(x, self.local_weight, self.bias)

    def forward(self, x: torch.Tensor, last_indices: torch.Tensor | None = None) -> torch.Tensor:
        """``x``：``(token 数, hidden)``。``last_indices``：每个请求最后一个 token 在 ``x`` 里的
        行号；None 表示每一行都要（decode 时每个请求本来就只有一个 token）。返回 ``(n, V)``。"""
        logits = self._comm.all_gather(self.forward_local(x, last_indices), dim=-1)
        return logits[:, : self.num_embeddings]
