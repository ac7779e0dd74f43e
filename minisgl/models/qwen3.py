"""Qwen3：结构上就是 Llama，外加一处改动——QK-Norm。

在 RoPE 之前，对每个注意力头的 q 和 k 各做一次 RMSNorm（沿 head_dim，权重在各头之间共享）。
它让 q·k 的大小不随训练漂移，注意力 logits 更稳定。权重多出 ``self_attn.q_norm.weight``、
``self_attn.k_norm.weight`` 两个 ``(head_dim,)`` 的向量；计算在第 4 章的 ``AttentionLayer`` 里。

Llama 和 Qwen3 在 config.json 里的其他差别（GQA 的分组、``head_dim`` 不等于
``hidden / 头数``、小模型共用词嵌入、RoPE 的底数）都只是配置，同一份代码照单全收。
"""

from __future__ import annotations

# >> ch06
from typing import TYPE_CHECKING

import torch

from minisgl.layers import BaseOP, LinearReplicated
from minisgl.moe import MoELayer

# << ch06
from .llama import LlamaDecoderLayer, LlamaForCausalLM

__all__ = ["Qwen3DecoderLayer", "Qwen3ForCausalLM"]


class Qwen3DecoderLayer(LlamaDecoderLayer):
    """比 Llama 的解码层多了 q/k 归一化。"""

    qk_norm = True


class Qwen3ForCausalLM(LlamaForCausalLM):
    layer_cls = Qwen3DecoderLayer


# >> ch06
if TYPE_CHECKING:
    from .config import ModelConfig


class MoEMLP(BaseOP):
    """Qwen3-MoE 的 MLP：路由器 ``gate`` 给每个 token 打 ``E`` 个分，一层的专家 ``experts``
    按打分选出 k 个、算出加权和（第 6 章的 ``MoELayer``，张量并行时在里面 all_reduce）。

    路由器是复制的线性层：它很小（``E × hidden``），而且每个 rank 必须做出**同样的**路由决定——
    切开它，各 rank 就得先通信一次才知道每个 token 去哪。权重名 ``mlp.gate.weight``、
    ``mlp.experts.gate_up_proj``、``mlp.experts.down_proj`` 和第 2 章加载器交出的一致。
    """

    def __init__(self, config: ModelConfig) -> None:
        self.gate = LinearReplicated(config.hidden_size, config.num_experts)
        self.experts = MoELayer(
            config.num_experts,
            config.num_experts_per_tok,
            config.hidden_size,
            config.moe_intermediate_size,
            renormalize=config.norm_topk_prob,
            hidden_act=config.hidden_act,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.experts.forward(x, self.gate.forward(x))


class Qwen3MoeDecoderLayer(Qwen3DecoderLayer):
    """注意力和 Qwen3 一样；MLP 按 config 决定：MoE 层用 ``MoEMLP``，其余（``mlp_only_layers``、
    不在 ``decoder_sparse_step`` 上的层）用中间维度为 ``intermediate_size`` 的稠密 MLP。"""

    def build_mlp(self, config: ModelConfig, layer_id: int) -> BaseOP:
        if config.is_moe_layer(layer_id):
            return MoEMLP(config)
        return super().build_mlp(config, layer_id)


class Qwen3MoeForCausalLM(Qwen3ForCausalLM):
    layer_cls = Qwen3MoeDecoderLayer


__all__ += ["MoEMLP", "Qwen3MoeDecoderLayer", "Qwen3MoeForCausalLM"]
# << ch06
