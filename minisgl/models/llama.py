"""Llama：词嵌入 → N 个解码层 → 最后的 RMSNorm → LM head。

这是后面所有模型的骨架。一个解码层是 transformers 里熟悉的 pre-norm 结构::

    h = h + attn(input_layernorm(h))
    h = h + mlp(post_attention_layernorm(h))

我们把每个 "+ 残差" 推迟到下一个 norm 里，用第 3 章的 ``RMSNormFused`` 一步做完
（加残差、再归一化，原地改写）。于是层与层之间传的是一对 ``(x, residual)``：
``x`` 是上一块的输出，``residual`` 是到上一块之前为止的残差流。

类和属性的名字照抄 transformers（``model.layers.0.self_attn.qkv_proj`` ……），
状态字典的键就和第 2 章加载器交出的名字一一对应，不需要任何改名表。
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from minisgl.core import get_global_ctx
from minisgl.layers import BaseOP, OPList, ParallelLMHead, RMSNormFused, VocabParallelEmbedding
from minisgl.utils import nvtx_annotate

from .base import BaseLLMModel, lm_head_rows
from .utils import GatedMLP, RopeAttn

if TYPE_CHECKING:
    import torch

    from .config import ModelConfig

__all__ = ["LlamaDecoderLayer", "LlamaForCausalLM", "LlamaModel"]


class LlamaDecoderLayer(BaseOP):
    """一个解码层：注意力块 + MLP 块，各带一个 pre-norm。

    两个类属性/方法是留给子类的口子：``qk_norm``（Qwen3 在 RoPE 之前对每个头的 q、k 做
    RMSNorm）和 ``build_mlp``（第 6 章的 Qwen3-MoE 在这里把某些层的 MLP 换成 MoE）。
    """

    qk_norm: ClassVar[bool] = False

    def __init__(self, config: ModelConfig, layer_id: int) -> None:
        self.input_layernorm = RMSNormFused(config.hidden_size, config.rms_norm_eps)
        self.self_attn = RopeAttn(config, layer_id, qk_norm=self.qk_norm)
        self.post_attention_layernorm = RMSNormFused(config.hidden_size, config.rms_norm_eps)
        self.mlp = self.build_mlp(config, layer_id)
        self.layer_id = layer_id

    def build_mlp(self, config: ModelConfig, layer_id: int) -> BaseOP:
        """第 ``layer_id`` 层用什么 MLP。稠密模型每层都一样。"""
        return GatedMLP(config.hidden_size, config.intermediate_size, config.hidden_act)

    @nvtx_annotate("Layer_{}", layer_id_field="layer_id")
    def forward(
        self, x: torch.Tensor, residual: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # 第一层 residual 是 None：x（词嵌入）本身就是残差流的起点
        x, residual = self.input_layernorm.forward(x, residual)
        x = self.self_attn.forward(x)
        x, residual = self.post_attention_layernorm.forward(x, residual)  # residual += 注意力输出
        x = self.mlp.forward(x)
        return x, residual  # MLP 的输出还没加进残差流：留给下一层的 input_layernorm


class LlamaModel(BaseOP):
    """``input_ids (T,) -> 隐藏状态 (T, hidden)``，对批次里的每个新 token 都算。"""

    def __init__(self, config: ModelConfig, layer_cls: type[LlamaDecoderLayer]) -> None:
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.layers = OPList([layer_cls(config, i) for i in range(config.num_layers)])
        self.norm = RMSNormFused(config.hidden_size, config.rms_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens.forward(input_ids)
        residual: torch.Tensor | None = None
        for layer in self.layers:
            x, residual = layer.forward(x, residual)
        return self.norm.forward(x, residual)[0]  # 最后一层 MLP 的输出在这里加进残差流


class LlamaForCausalLM(BaseLLMModel):
    """``model``（上面的解码器）+ ``lm_head``。子类换掉 ``layer_cls`` 就得到别的模型。"""

    layer_cls: ClassVar[type[LlamaDecoderLayer]] = LlamaDecoderLayer

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.model = LlamaModel(config, self.layer_cls)
        # 共用词嵌入时，LM head 没有自己的权重，直接读 embed_tokens.weight：第 2 章的加载器
        # 不交出 lm_head.weight，状态字典里也就没有这个键，内存里只有一份
        tied = self.model.embed_tokens if config.tie_word_embeddings else None
        self.lm_head = ParallelLMHead(config.vocab_size, config.hidden_size, tied_embedding=tied)

    def forward(self) -> torch.Tensor:
        batch = get_global_ctx().batch
        hidden = self.model.forward(batch.input_ids)
        return self.lm_head.forward(hidden, lm_head_rows(batch))
