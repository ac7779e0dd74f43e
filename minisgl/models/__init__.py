"""模型：配置和权重（``config``、``weight``）、模型结构（``llama``、``qwen3``），以及把它们接起来的两个入口。

- ``create_model(config)``：按 config.json 里的 ``architectures[0]`` 在登记表 ``MODELS`` 里找到
  模型类并实例化。只建结构，权重是 ``torch.empty`` 的占位；
- ``load_model(path)``：在 meta 设备上建结构（不分配内存），再用第 2 章的加载器把权重一个个
  读进来，严格加载（名字、形状都要对上）换掉占位张量。

这个文件刻意不在顶部导入模型模块：``from minisgl.models.config import ModelConfig`` 会先执行
这里，而 ``layers/``、``kvcache/``、``attention/`` 都要用 ``ModelConfig``。如果这里一上来就导入
``llama.py``（它又导入 ``layers/``），哪个层在运行时导入 ``models.config`` 时就会转一圈导入回
半初始化的自己，形成循环导入。所以登记表里放的是"怎么创建"的小函数，用到哪个模型才导入
哪个模块——官方的 ``register.py`` 也是按需导入的。
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import torch

from minisgl.utils import Registry, default_dtype, pick_device, torch_dtype

from .config import ModelConfig, RotaryConfig
from .weight import load_weights

if TYPE_CHECKING:
    from .base import BaseLLMModel

__all__ = ["MODELS", "ModelConfig", "RotaryConfig", "create_model", "load_model"]

ModelCreator = Callable[[ModelConfig], "BaseLLMModel"]

# 键是 Hugging Face config.json 里 architectures[0] 的写法
MODELS: Registry[ModelCreator] = Registry("model architecture")


@MODELS.register("LlamaForCausalLM")
def _create_llama(config: ModelConfig) -> BaseLLMModel:
    from .llama import LlamaForCausalLM

    return LlamaForCausalLM(config)


@MODELS.register("Qwen3ForCausalLM")
def _create_qwen3(config: ModelConfig) -> BaseLLMModel:
    from .qwen3 import Qwen3ForCausalLM

    return Qwen3ForCausalLM(config)


# >> ch06
@MODELS.register("Qwen3MoeForCausalLM")
def _create_qwen3_moe(config: ModelConfig) -> BaseLLMModel:
    from .qwen3 import Qwen3MoeForCausalLM

    return Qwen3MoeForCausalLM(config)


# << ch06
def create_model(config: ModelConfig) -> BaseLLMModel:
    """按 ``config.architecture`` 建模型。权重是占位张量，跟随当前的默认设备和 dtype——
    在 ``with torch.device("meta")`` 里调用就一点内存也不分配。

    不认识的结构报 ValueError，列出支持的全部结构名。
    """
    try:
        create = MODELS.get(config.architecture)
    except ValueError as e:
        raise ValueError(f"config.json: {e}") from None
    return create(config)


def load_model(
    model_path: str | Path,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> BaseLLMModel:
    """读 config.json、建模型、加载权重，返回可以直接 ``forward()`` 的模型。

    ``model_path`` 是本地文件夹或 Hub 上的名字；``device`` 默认按第 1 章的规则挑
    （``MINISGL_DEVICE`` > cuda > mps > cpu）；``dtype`` 默认是这个设备上的默认精度
    （CUDA 上 bf16，其余 float32），checkpoint 里存的精度不同时在加载时转换。

    整个过程内存里只有一份权重：结构建在 meta 设备上，占位张量没有存储；加载器一次读、
    拼、切好一个张量，直接放在 ``device`` 上。全部交齐之后一次性严格加载——缺的、多的、
    形状或 dtype 不对的一起报出来，有一处不对就一个也不换。
    """
    device = pick_device(device)
    dtype = dtype or default_dtype(device)
    config = ModelConfig.from_pretrained(model_path)
    with torch.device("meta"), torch_dtype(dtype):
        model = create_model(config)
    weights = dict(load_weights(model_path, config, dtype=dtype, device=device))
    model.load_state_dict(weights)
    return model


# >> ch06
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .utils import GenerateOutput

__all__ += ["generate_in_new_context", "load_and_generate"]


def generate_in_new_context(
    model: BaseLLMModel,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    *,
    page_size: int = 4,
) -> GenerateOutput:
    """给 ``model`` 建一个刚好够用的上下文（KV 池、页表、注意力后端），贪心生成，再拆掉上下文。

    KV 池和模型在同一个设备上、用同一个 dtype；张量并行时池子里只有本 rank 的 KV 头。
    返回的 logits 在 CPU 上（``keep_logits=True``）。第 7 章的 Engine 会按显存算出池子该开多大，
    这里只开这几段提示用得到的页数。本进程原来的全局上下文会被换掉，结束时清空。
    """
    from minisgl.attention import create_attention_backend
    from minisgl.core import Context, reset_global_ctx, set_global_ctx
    from minisgl.kvcache import create_kvcache_pool
    from minisgl.utils import div_ceil

    from .utils import greedy_generate

    weight = next(iter(model.state_dict().values()))  # 池子放在权重所在的设备上，用同样的 dtype
    columns = div_ceil(max(len(p) for p in prompts) + max_new_tokens, page_size) * page_size
    num_pages = len(prompts) * columns // page_size
    pool = create_kvcache_pool(model.config, num_pages, page_size, weight.dtype, weight.device)
    table = torch.zeros(len(prompts), columns, dtype=torch.int32, device=weight.device)
    backend = create_attention_backend("torch", model.config, pool, table)
    reset_global_ctx()
    set_global_ctx(Context(page_table=table, kv_cache=pool, attn_backend=backend))
    try:
        return greedy_generate(model, prompts, max_new_tokens, keep_logits=True)
    finally:
        reset_global_ctx()


def load_and_generate(
    model_path: str | Path,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> GenerateOutput:
    """一个 rank 的全部工作：加载**本 rank 的那一片**权重，在新的上下文里贪心生成，
    把结果（token 和 CPU 上的 logits）返回。

    张量并行时每个 rank 各调用一次（第 6 章的 ``spawn_ranks``）：切成几片、拿哪一片都由
    ``get_tp_info()`` 决定，通信走已经建好的进程组。tp=1 时就是普通的单进程生成，拿来当参照。
    默认 float32：要和 tp=1 逐位比较 logits，bf16 的舍入误差太大。
    """
    model = load_model(model_path, device=device, dtype=dtype)
    return generate_in_new_context(model, prompts, max_new_tokens)


# << ch06
