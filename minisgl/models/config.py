"""模型的结构参数：从 Hugging Face 的 ``config.json`` 里读出推理真正用到的那几个数。

``config.json`` 里有几十个字段，推理引擎只关心其中十几个：多少层、隐藏维度、几个 Q 头几个 KV 头、
每个头多宽、词表多大、RoPE 怎么算、是不是 MoE。``ModelConfig`` 把它们收成一个不可变的 dataclass，
后面的算子、模型、KV 缓存、显存预算都只看它，不再碰原始的 JSON。

读 JSON 时要应付几种写法：

- ``head_dim`` 可能没写（Llama），这时是 ``hidden_size // num_attention_heads``；
- ``num_key_value_heads`` 可能没写（老的多头注意力模型），这时和 Q 头一样多；
- RoPE 的底数在 transformers 4 写成顶层的 ``rope_theta``，缩放参数在 ``rope_scaling``；
  transformers 5 把两者合成一个 ``rope_parameters``。两种都要认。

必需的字段缺了、类型不对、数值不合理（头数不是 KV 头数的整数倍……）都立刻报错，说出字段名，
而不是等到加载权重时才冒出一个形状对不上的张量。
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

__all__ = ["SUPPORTED_MODEL_TYPES", "ModelConfig", "RotaryConfig"]

# 本书实现的模型结构（config.json 的 model_type）
SUPPORTED_MODEL_TYPES = ("llama", "qwen3", "qwen3_moe")
_DEFAULT_ARCHITECTURE = {
    "llama": "LlamaForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}
# transformers 里 LlamaConfig、Qwen3Config 的 rope_theta 默认值：文件里没写时就是它
_DEFAULT_ROPE_THETA = 10000.0


@dataclass(frozen=True)
class RotaryConfig:
    """RoPE 的参数。``scaling`` 为 None 表示普通的 RoPE；否则是 llama3、yarn 等缩放方式的参数字典
    （HF 的 ``rope_scaling`` / ``rope_parameters`` 去掉 ``rope_theta``，一定带 ``rope_type``），
    第 3 章的 RoPE 算子按它生成 cos/sin 表。"""

    head_dim: int
    rotary_dim: int  # 参与旋转的维度数；部分旋转的模型小于 head_dim
    max_position: int
    base: float
    scaling: dict[str, Any] | None = field(hash=False)  # 字典不能哈希，不参与 hash


@dataclass(frozen=True)
class ModelConfig:
    """推理需要的全部结构参数。字段名是引擎内部的叫法，括号里是 config.json 的字段名。"""

    architecture: str  # architectures[0]，例如 "Qwen3ForCausalLM"
    model_type: str  # "qwen3" | "llama" | "qwen3_moe"
    num_layers: int  # num_hidden_layers
    hidden_size: int
    num_qo_heads: int  # num_attention_heads
    num_kv_heads: int  # num_key_value_heads
    head_dim: int
    intermediate_size: int  # 稠密 MLP 的中间维度
    vocab_size: int
    rms_norm_eps: float
    hidden_act: str
    tie_word_embeddings: bool  # LM head 和词嵌入共用同一个矩阵
    rotary_config: RotaryConfig
    attention_bias: bool  # q/k/v/o 四个投影带 bias
    num_experts: int = 0  # 以下是 MoE 的参数（0 = 稠密模型）
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0  # 每个专家的中间维度
    norm_topk_prob: bool = False  # 选出的 top-k 个专家的权重是否重新归一化
    decoder_sparse_step: int = 1  # 每隔几层一个 MoE 层（Qwen3-MoE 都是 1）
    mlp_only_layers: tuple[int, ...] = ()  # 强制用稠密 MLP 的层

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def has_qk_norm(self) -> bool:
        """Qwen3 系列在 RoPE 之前对每个头的 q、k 各做一次 RMSNorm，多出 q_norm/k_norm 两个权重。"""
        return self.model_type in ("qwen3", "qwen3_moe")

    def is_moe_layer(self, layer: int) -> bool:
        """第 ``layer`` 层的 MLP 是不是 MoE（规则与 transformers 的 Qwen3-MoE 相同）。"""
        return (
            self.is_moe
            and layer not in self.mlp_only_layers
            and (layer + 1) % self.decoder_sparse_step == 0
        )

    @classmethod
    def from_hf(cls, hf: Mapping[str, Any]) -> ModelConfig:
        """从 ``config.json`` 读出来的字典构造。缺字段、类型不对、数值不合理都报 ValueError。"""
        get = _FieldReader(hf)
        model_type = get.text("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"config.json: model_type {model_type!r} is not supported; "
                f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        architectures = hf.get("architectures") or [_DEFAULT_ARCHITECTURE[model_type]]
        hidden_size = get.integer("hidden_size")
        num_qo_heads = get.integer("num_attention_heads")
        num_kv_heads = get.integer("num_key_value_heads", default=num_qo_heads)
        if num_qo_heads % num_kv_heads != 0:
            raise ValueError(
                f"config.json: num_attention_heads={num_qo_heads} is not a multiple of "
                f"num_key_value_heads={num_kv_heads}"
            )
        head_dim = get.integer("head_dim", default=0)
        if head_dim == 0:  # Llama 等不写 head_dim：每个头平分隐藏维度
            if hidden_size % num_qo_heads != 0:
                raise ValueError(
                    f"config.json: no head_dim, and hidden_size={hidden_size} is not divisible "
                    f"by num_attention_heads={num_qo_heads}"
                )
            head_dim = hidden_size // num_qo_heads
        moe = model_type == "qwen3_moe"
        config = cls(
            architecture=str(architectures[0]),
            model_type=model_type,
            num_layers=get.integer("num_hidden_layers"),
            hidden_size=hidden_size,
            num_qo_heads=num_qo_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            intermediate_size=get.integer("intermediate_size"),
            vocab_size=get.integer("vocab_size"),
            rms_norm_eps=get.number("rms_norm_eps"),
            hidden_act=get.text("hidden_act", default="silu"),
            tie_word_embeddings=get.flag("tie_word_embeddings", default=False),
            rotary_config=_rotary_config(hf, get, head_dim),
            attention_bias=get.flag("attention_bias", default=False),
            num_experts=get.integer("num_experts") if moe else 0,
            num_experts_per_tok=get.integer("num_experts_per_tok") if moe else 0,
            moe_intermediate_size=get.integer("moe_intermediate_size") if moe else 0,
            norm_topk_prob=get.flag("norm_topk_prob", default=False) if moe else False,
            decoder_sparse_step=get.integer("decoder_sparse_step", default=1) if moe else 1,
            mlp_only_layers=tuple(get.integers("mlp_only_layers")) if moe else (),
        )
        if config.num_experts_per_tok > config.num_experts:
            raise ValueError(
                f"config.json: num_experts_per_tok={config.num_experts_per_tok} is larger than "
                f"num_experts={config.num_experts}"
            )
        return config

    @classmethod
    def from_pretrained(cls, path: str | Path) -> ModelConfig:
        """本地文件夹或 Hub 上的名字 -> ModelConfig（只读 config.json，不碰权重）。"""
        from minisgl.utils.hf import load_hf_config

        return cls.from_hf(load_hf_config(path))


def _rotary_config(hf: Mapping[str, Any], get: _FieldReader, head_dim: int) -> RotaryConfig:
    """RoPE 的参数可能在三个地方：``rope_parameters``（transformers 5）、``rope_scaling`` 和
    顶层的 ``rope_theta``（transformers 4）。缩放方式取第一个不是 "default" 的；底数依次找
    ``rope_parameters``、``rope_scaling``（Mistral 把它放在这里）、顶层。"""
    candidates: list[dict[str, Any]] = []
    for key in ("rope_parameters", "rope_scaling"):
        value = hf.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ValueError(f"config.json: {key} must be an object, got {value!r}")
        params = dict(value)
        if "rope_type" not in params and "type" in params:  # 老的写法
            params["rope_type"] = params["type"]
        candidates.append(params)
    base: Any = next((c["rope_theta"] for c in candidates if "rope_theta" in c), None)
    if base is None:
        base = get.number("rope_theta", default=_DEFAULT_ROPE_THETA)
    if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 0:
        raise ValueError(f"config.json: rope_theta must be a positive number, got {base!r}")
    scaling = next((c for c in candidates if c.get("rope_type", "default") != "default"), None)
    factor = get.number("partial_rotary_factor", default=1.0)
    if scaling is not None:
        scaling = {k: v for k, v in scaling.items() if k != "rope_theta"}
        factor = float(scaling.pop("partial_rotary_factor", factor))
    return RotaryConfig(
        head_dim=head_dim,
        rotary_dim=int(head_dim * factor),
        max_position=get.integer("max_position_embeddings"),
        base=float(base),
        scaling=scaling,
    )


_REQUIRED: Any = object()


class _FieldReader:
    """按类型读 config.json 的字段；缺了（且没有默认值）或类型不对时报错，说出字段名。
    没写和写成 null 一样对待：用默认值，没有默认值就报错。"""

    def __init__(self, hf: Mapping[str, Any]) -> None:
        self.hf = hf

    def _raw(self, key: str, default: Any) -> tuple[Any, bool]:
        value = self.hf.get(key)
        if value is not None:
            return value, True
        if default is _REQUIRED:
            raise ValueError(f"config.json: missing required field {key!r}")
        return default, False

    def integer(self, key: str, default: Any = _REQUIRED, minimum: int = 1) -> int:
        value, found = self._raw(key, default)
        # JSON 里的 true 在 Python 里也是 int，要单独排除
        if found and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
            raise ValueError(f"config.json: {key} must be an integer >= {minimum}, got {value!r}")
        return value

    def number(self, key: str, default: Any = _REQUIRED) -> float:
        value, found = self._raw(key, default)
        if found and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"config.json: {key} must be a number, got {value!r}")
        return float(value)

    def flag(self, key: str, default: Any = _REQUIRED) -> bool:
        value, found = self._raw(key, default)
        if found and not isinstance(value, bool):
            raise ValueError(f"config.json: {key} must be true or false, got {value!r}")
        return value

    def text(self, key: str, default: Any = _REQUIRED) -> str:
        value, found = self._raw(key, default)
        if found and not isinstance(value, str):
            raise ValueError(f"config.json: {key} must be a string, got {value!r}")
        return value

    def integers(self, key: str) -> list[int]:
        value, found = self._raw(key, [])
        if found and not (
            isinstance(value, list)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        ):
            raise ValueError(f"config.json: {key} must be a list of layer indices, got {value!r}")
        return value
