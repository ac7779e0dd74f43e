"""所有模型的基类 ``BaseLLMModel``，以及 LM head 该算哪几行。

一个模型对外只有一个动作：``forward()``，不带参数。要算的批次在全局上下文里
（``get_global_ctx().batch``，第 4 章），返回的是这一批**每个请求**下一个 token 的 logits，
形状 ``(请求数, vocab_size)``——不是每个 token 一行。采样只看每个请求最后一个位置，
其余位置的 logits 算出来也是扔掉，而 LM head 是整个模型里最大的一次矩阵乘。
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from minisgl.layers import BaseOP

if TYPE_CHECKING:
    import torch

    from minisgl.core import Batch

    from .config import ModelConfig

__all__ = ["BaseLLMModel", "lm_head_rows"]


class BaseLLMModel(BaseOP, ABC):
    """因果语言模型。子类在 ``__init__`` 里搭好各层（权重名与第 2 章加载器交出的一致），
    实现 ``forward``。``config`` 不是张量，不进状态字典。"""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config

    @abstractmethod
    def forward(self) -> torch.Tensor:
        """当前批次每个请求下一个 token 的 logits：``(batch.size, vocab_size)``。"""


def lm_head_rows(batch: Batch) -> torch.Tensor | None:
    """LM head 要算隐藏状态的哪几行。

    - prefill：一个请求有很多个新 token，只要最后一个——第 4 章后端元数据里的
      ``get_last_indices``；
    - decode：每个请求恰好一个新 token，每一行都要，返回 None（省掉一次无用的 gather）。
    """
    if batch.is_prefill:
        return batch.attn_metadata.get_last_indices(batch.size)
    return None
