"""算子的纯 PyTorch 实现：embedding 查表、RMSNorm、RoPE、门控激活。

官方 mini-sglang 把这些算子交给 CUDA 库：查表是自己 JIT 编译的 ``index.cu``，RMSNorm、RoPE、
激活来自 FlashInfer。它们只能在 NVIDIA GPU 上跑。我们先用几行 PyTorch 写出每个算子的
**语义**——输入是什么、输出写到哪里、哪些参数被原地修改——layers/ 里的层只调用这里的函数。
第四阶段用 Triton 写更快的 kernel 时，只替换这个模块里的实现，层和模型一行不改；
这里的实现也就成了那些 kernel 的参照答案。

约定：所有函数都不关心张量在哪个设备上；需要高精度的中间量（RMSNorm 的方差、RoPE 的旋转）
一律在 float32 里算，再转回输入的 dtype。
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "apply_rope_inplace",
    "fused_add_rmsnorm",
    "gelu_and_mul",
    "indexing",
    "rmsnorm",
    "silu_and_mul",
    # >> ch04
    "store_cache",
    # << ch04
    # >> ch19
    "linear",
    "linear_silu_and_mul",
    "qk_norm_rope_inplace",
    "qk_norm_rope_store",
    "warm_up_token_counts",
    # << ch19
]


# >> ch19
import contextlib

from minisgl.utils.device import use_triton_interpreter_unless_cuda

use_triton_interpreter_unless_cuda()  # 必须在导入 triton 之前
try:  # 可选：没有 triton 时 GPU 上也用下面的 PyTorch 写法
    from . import triton_linear, triton_ops
except ImportError:
    triton_linear = triton_ops = None  # type: ignore[assignment]


def _use_triton(x: torch.Tensor, *others: torch.Tensor) -> bool:
    """CUDA 上、装了 triton、``others``（权重、残差……）和输入 ``x`` 同一个 dtype（不同时结果会被
    提升 dtype，交给 PyTorch）。"""
    return x.is_cuda and triton_ops is not None and all(t.dtype == x.dtype for t in others)


def warm_up_token_counts(device: torch.device) -> tuple[int, ...]:
    """引擎启动时该各跑一次 prefill 的 token 数：GPU 上用 Triton 时，SiLU-mul 的块按行数分的
    几档，加上 GEMV 按 M 分的两组（各自的 ``token_counts_to_warm_up``）；PyTorch 的写法不用
    编译，一个也不用。"""
    if device.type != "cuda" or triton_ops is None or triton_linear is None:
        return ()
    counts = {*triton_ops.token_counts_to_warm_up(), *triton_linear.token_counts_to_warm_up()}
    return tuple(sorted(counts))


def without_dependent_launch() -> contextlib.AbstractContextManager[None]:
    """录 prefill 的 CUDA Graph 时关掉依赖启动（``triton_ops.without_dependent_launch``）；
    没有 triton 时什么也不用做。"""
    if triton_ops is None:
        return contextlib.nullcontext()
    return triton_ops.without_dependent_launch()


# << ch19
# ---------------------------------------------------------------- embedding 查表


def indexing(
    weight: torch.Tensor,
    indices: torch.Tensor,
    *,
    vocab_range: tuple[int, int] | None = None,
) -> torch.Tensor:
    """按 token id 取 ``weight`` 的行：``(N,) -> (N, hidden)``。

    ``vocab_range=(start, end)`` 用于词表并行：本 rank 只持有全词表里 ``[start, end)`` 这一段，
    ``weight`` 的第 0 行对应 token ``start``。不在这一段里的 token 输出全 0 行——它的 embedding
    在别的 rank 上。各 rank 的结果相加（all_reduce）之后，每个 token 恰好只有一个 rank
    贡献了非零行。
    ``end - start`` 可以小于 ``weight`` 的行数：最后一个 rank 的末尾是补齐用的空行。
    """
    if vocab_range is None:
        return F.embedding(indices, weight)
    start, end = vocab_range
    if not 0 <= end - start <= weight.shape[0]:
        raise ValueError(
            f"vocab_range {vocab_range} does not fit a weight with {weight.shape[0]} rows"
        )
    local = indices - start
    outside = (local < 0) | (local >= end - start)
    # 先把越界的 id 换成 0 号行去查（任何合法的行都行），查完再把这些行清零
    out = F.embedding(local.masked_fill(outside, 0), weight)
    return out.masked_fill_(outside.unsqueeze(-1), 0)


# ---------------------------------------------------------------- RMSNorm


def rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``weight * x / sqrt(mean(x²) + eps)``，沿最后一维归一化。

    方差在 float32 里算（bf16 只有 8 位有效数字，平方再求和误差很大），归一化后先转回 ``x`` 的
    dtype 再乘 ``weight``——这正是 transformers 里 ``Qwen3RMSNorm`` / ``LlamaRMSNorm`` 的顺序，
    bf16 下也能逐位对上。``out`` 不为 None 时把结果写进 ``out``（可以就是 ``x`` 本身）并返回它。
    """
    # >> ch19
    if _use_triton(x, weight):  # GPU 上一个 kernel（第 19 章），舍入的顺序和下面三行一样
        return triton_ops.rmsnorm(x, weight, eps, out=out)
    # << ch19
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = weight * normed.to(x.dtype)
    if out is None:
        return y
    return out.copy_(y)


def fused_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
) -> None:
    """先加残差、再归一化，两个输入都被**原地**改写，没有返回值：

    - ``residual`` ← ``x + residual``（新的残差流，下一层还要用）；
    - ``x`` ← ``rmsnorm(新的 residual) * weight``（送进注意力或 MLP 的输入）。

    合成一个算子是为了省显存带宽：GPU 上 FlashInfer 的 kernel 读一遍 x 和 residual、
    各写一遍，中间结果不落地。这里的两行 PyTorch 定义了它的语义。加法在输入的 dtype 里做，
    和 transformers 的 ``hidden_states = residual + hidden_states`` 一样。
    """
    # >> ch19
    if _use_triton(x, weight, residual):
        triton_ops.rmsnorm(x, weight, eps, out=x, residual=residual)
        return
    # << ch19
    residual.add_(x)
    rmsnorm(residual, weight, eps, out=x)


# ---------------------------------------------------------------- RoPE


def apply_rope_inplace(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    head_dim: int,
) -> None:
    """对 ``q``、``k`` 原地施加旋转位置编码（rotate-half，也叫 NeoX 风格）。

    - ``positions``：``(T,)``，每个 token 在自己序列里的位置；
    - ``q``、``k``：``(T, 头数 * head_dim)`` 或 ``(T, 头数, head_dim)``。可以是从 qkv 大矩阵里
      ``split`` 出来的视图：原地写回，qkv 里对应的列也就变了，不用再拼回去；
    - ``cos_sin_cache``：``(最大位置, rotary_dim)``，每行前一半是 cos、后一半是 sin。

    每个头的前 ``rotary_dim`` 维分成前后两半 ``x1``、``x2``，第 i 对 ``(x1[i], x2[i])`` 转过角度
    ``位置 * inv_freq[i]``；``rotary_dim < head_dim`` 时其余的维度原样不动。
    """
    # >> ch19
    if _use_triton(q) and cos_sin_cache.dtype == torch.float32:
        triton_ops.apply_rope_inplace(positions, q, k, cos_sin_cache, head_dim)
        return
    # << ch19
    rotary_dim = cos_sin_cache.shape[-1]
    cos, sin = cos_sin_cache[positions].unsqueeze(1).chunk(2, dim=-1)  # 各 (T, 1, rotary_dim/2)
    for x in (q, k):
        rot = x.view(x.shape[0], -1, head_dim)[..., :rotary_dim]  # (T, 头数, rotary_dim) 的视图
        x1, x2 = rot.float().chunk(2, dim=-1)
        rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
        rot.copy_(rotated)  # 写回视图 = 写回 x = 写回 qkv


# >> ch19
def qk_norm_rope_inplace(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float,
    cos_sin_cache: torch.Tensor,
    head_dim: int,
) -> None:
    """Qwen3 注意力层里连着的三步合成一个算子：q、k 逐头 RMSNorm（各自的权重、同一个 ``eps``），
    再施加 RoPE，全部原地写回。语义就是下面三行（参数见 ``rmsnorm``、``apply_rope_inplace``）；
    GPU 上是一个 Triton kernel：每个头读一遍、写一遍，舍入的顺序和三行一样。"""
    if _use_triton(q, k, q_weight, k_weight) and cos_sin_cache.dtype == torch.float32:
        triton_ops.qk_norm_rope_inplace(
            positions, q, k, q_weight, k_weight, eps, cos_sin_cache, head_dim
        )
        return
    rmsnorm(q, q_weight, eps, out=q)
    rmsnorm(k, k_weight, eps, out=k)
    apply_rope_inplace(positions, q, k, cos_sin_cache, head_dim)


def qk_norm_rope_store(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float,
    cos_sin_cache: torch.Tensor,
    head_dim: int,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
) -> None:
    """``qk_norm_rope_inplace`` 之后紧接着 ``store_cache(k_cache, v_cache, indices, k, v)``：
    算好的 k 和原样的 v 写进 KV 池。GPU 上两步是同一个 kernel，注意力层每层少启动一个。"""
    if (
        _use_triton(q, k, v, q_weight, k_weight, k_cache, v_cache)
        and cos_sin_cache.dtype == torch.float32
    ):
        triton_ops.qk_norm_rope_store(
            positions, q, k, v, q_weight, k_weight, eps, cos_sin_cache, head_dim,
            k_cache, v_cache, indices,
        )  # fmt: skip
        return
    qk_norm_rope_inplace(positions, q, k, q_weight, k_weight, eps, cos_sin_cache, head_dim)
    store_cache(k_cache, v_cache, indices, k, v)


# ---------------------------------------------------------------- 线性层


def _small_m_kernel_fits(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Triton GEMV 接得住、又比 cuBLAS 快的情形：x 是 ``(M, K)``、``1 <= M <= MAX_M``，全都连续，
    dtype 都是同一个 bf16/fp16（GPU 上模型的权重就是它们；H200 上量过，见 ``triton_linear``
    的说明）。"""
    tensors = (x, weight) if bias is None else (x, weight, bias)
    m = x.shape[0] if x.dim() == 2 else 0
    return (
        triton_linear is not None
        and 1 <= m <= triton_linear.MAX_M
        and x.dtype in (torch.bfloat16, torch.float16)
        and all(t.dtype == x.dtype and t.is_contiguous() for t in tensors)
    )


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)``：``y = x @ weight.T + bias``，``weight`` 是 ``(N, K)``。

    decode 时 x 只有几行，这是把权重读一遍就完事的"瘦"矩阵乘；输出窄、K 长的（o_proj、down）
    cuBLAS 切 K 再归约，读得慢。GPU 上 M 不超过 16 时换成按带宽写的 Triton GEMV（float32 累加，
    和 ``F.linear`` 只差舍入）；其余情形（prefill 的大矩阵乘、float32、CPU）仍是 ``F.linear``。
    """
    if x.is_cuda and _small_m_kernel_fits(x, weight, bias):
        return triton_linear.linear_small_m(x, weight, bias)
    return F.linear(x, weight, bias)


# << ch19
# ---------------------------------------------------------------- 门控激活


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``x = [gate, up]`` 沿最后一维对半分，返回 ``silu(gate) * up``：``(…, 2I) -> (…, I)``。"""
    # >> ch19
    if _use_triton(x) and x.stride(-1) == 1:  # 一个 kernel，舍入同下一行
        return triton_ops.silu_and_mul(x)
    # << ch19
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


# >> ch19
def linear_silu_and_mul(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """``silu_and_mul(linear(x, weight, bias))``：``weight`` 的前一半行算 gate、后一半算 up。

    decode 时（x 只有几行）GPU 上 SiLU 和乘并进 GEMV 的 kernel 里，少启动一个 kernel：一个 token
    时 GEMV 算出几个 gate 和对应的 up 就地做完，几个 token 时在合并 K 各段部分和的那一步做。
    其余情形是上面的两步。"""
    if x.is_cuda and bias is None and _small_m_kernel_fits(x, weight, None):
        return triton_linear.linear_silu_and_mul(x, weight)
    return silu_and_mul(linear(x, weight, bias))


# << ch19
def gelu_and_mul(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """同上，激活换成 GELU。``approximate="tanh"`` 是 ``gelu_pytorch_tanh`` 用的近似公式。"""
    gate, up = x.chunk(2, dim=-1)
    return F.gelu(gate, approximate=approximate) * up


# >> ch04
# ---------------------------------------------------------------- KV 缓存的写入


def store_cache(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
) -> None:
    """把 ``T`` 个 token 的 K、V 写进缓存的指定槽位：``k_cache[indices[i]] = k[i]``，V 同理。

    - ``k_cache``、``v_cache``：``(槽位数, kv 头数, head_dim)``，原地修改；
    - ``indices``：``(T,)`` 整数，各不相同（重复的槽位谁最后写入没有保证）；
    - ``k``、``v``：``(T, kv 头数, head_dim)`` 或 ``(T, kv 头数 * head_dim)``，可以是从 qkv
      大矩阵里切出来的不连续视图；dtype 必须和缓存一致（不悄悄转换精度）。

    官方用一个 JIT 编译的 CUDA kernel（``store.cu``）做这件事，每个 token 一个线程块拷一行；
    它的测试拿来对照的正是这里的一行 PyTorch。
    """
    # >> ch19
    if _use_triton(k, k_cache) and v.dtype == v_cache.dtype:  # dtype 不同时下面报错
        triton_ops.store_cache(k_cache, v_cache, indices, k, v)  # K、V 一个 kernel（第 19 章）
        return
    # << ch19
    index = indices.to(torch.int64)  # index_copy_ 只收 int64；页表是 int32
    for cache, x in ((k_cache, k), (v_cache, v)):
        if x.dtype != cache.dtype:
            raise TypeError(f"kv dtype {x.dtype} does not match the cache dtype {cache.dtype}")
        cache.index_copy_(0, index, x.reshape(x.shape[0], *cache.shape[1:]))


# << ch04
