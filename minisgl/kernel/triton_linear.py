"""批量很小（M ≤ 16）的线性层：一个按带宽设计的 Triton GEMV。

decode 时每步只有几个 token，``y = x @ W.T`` 的 x 只有几行：每个权重元素读进来只做 M 次乘加，
算力用不到百分之一，时间全花在把 W 从显存读一遍上——这是受带宽限制的"瘦"矩阵乘。
H200 上逐个形状量过（CUDA Graph 里、权重不在 L2 里，``tools/tune_kernels.py``）。M=1 时 cuBLAS
在输出宽的 qkv、gate_up 上是 5.2 µs 和 6.0 µs（这么小的 kernel 里启动和收尾也算在内）；输出只有
1024 维、K 很长的 o_proj（K=2048）和 down（K=3072），它沿 K 切开再多启动一个归约 kernel，
o_proj 一次 12.6 µs。这里的 kernel 打开依赖启动（见 ``triton_ops.dependent_launch``）后在这四个
形状上是 3.2、4.6、2.8、3.5 µs；M=8 时是 4.5、5.6、3.5、5.3 µs，cuBLAS 5.3、5.9、5.8、7.4 µs。
所以 M 不超过 16 时四个投影都用它。

这里的写法只为一件事：把 W 尽快地、恰好读一遍。

- 每个 program 负责 ``BLOCK_N`` 个输出（W 的 ``BLOCK_N`` 行），沿 K 把自己那片 W 流式读一遍；
  W 按行存放（``(N, K)``，K 方向连续），每次读 ``BLOCK_K`` 个相邻元素，是又宽又整齐的访存。
- x 的全部 M 行每次和 W 的这一片一起读进寄存器，给 ``BLOCK_N`` 行 W 共用；x 很小，
  各个 program 重复读它都落在 L2 里。
- program 要足够多，才能让 H200 的 132 个 SM 都有好几个 program 同时在等显存：N=1024、
  ``BLOCK_N=32`` 只有 32 个，于是再沿 K 切成 ``SPLIT_K`` 段，每段写一份 float32 的部分和，
  第二个 kernel 按固定的顺序把它们加起来。不用浮点的原子加：加法的顺序固定，每次运行
  结果逐位相同。多出来的这个 kernel 的启动，依赖启动也藏进了前一个 kernel 里。
- 累加一律在 float32 里做，最后（加上 bias）转回 x 的 dtype。

``M == 1`` 时乘加用逐元素乘再沿 K 求和；M 更大时用 ``tl.dot``（x 补到 16 行，张量核心的
最小形状）。这些参数都是 ``LinearConfig`` 的字段，由 ``pick_config`` 按 (M, N, K) 挑，
也可以直接传入——GPU 上测出来哪组最好，就改 ``pick_config``。

文件末尾的 ``linear_silu_and_mul`` 是 gate_up 投影连着 SiLU-mul：M = 1 时一个 program 算几个 gate
和同样位置的几个 up，就地做完激活；M 更大时激活放进合并部分和的那个 kernel。decode 时每层都少
一个 kernel。

这个模块直接 ``import triton``：``ops.py`` 只在装了 triton 时导入它，只在 CUDA 张量上调用它。
没有 GPU 的机器上测试用 Triton 的解释器调用同样的函数。函数里除了输出和部分和的
``torch.empty`` 没有别的分配，也不和 CPU 同步，可以录进 CUDA Graph。
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .triton_ops import (
    dependent_launch,
    dependent_start,
    gdc_launch_dependents,
    gdc_wait,
    silu_mul,
)

__all__ = [
    "MAX_M",
    "SILU_CONFIG",
    "LinearConfig",
    "linear_silu_and_mul",
    "linear_small_m",
    "pick_config",
    "token_counts_to_warm_up",
]

MAX_M = 16  # 超过它就是普通的矩阵乘了，交给 cuBLAS
_DOT_M = 16  # tl.dot 每一维至少 16
# float32 的 tl.dot 默认是 tf32（尾数只剩 10 位），ieee 才是真的 float32；bf16/fp16 用默认值
_PRECISION = {torch.float32: "ieee"}


class LinearConfig(NamedTuple):
    block_n: int
    block_k: int
    split_k: int  # 上限：K 切不出这么多段 BLOCK_K 时用更少的段
    num_warps: int = 4
    num_stages: int = 1
    dot: bool = False  # True：tl.dot（x 补到 16 行）；False：逐元素乘再求和


@functools.cache
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 132  # 解释器：数目只影响怎么切，不影响结果
    return torch.cuda.get_device_properties(device).multi_processor_count


def pick_config(m: int, n: int, k: int, num_sms: int = 132) -> LinearConfig:
    """按形状挑参数（H200 上打开依赖启动、在 CUDA Graph 里逐形状试过，见第 19 章）。

    M=1：逐元素乘加，一块读 1024 个元素，K 有几块就切几段（每段只读一块），每个 program 8 行 W、
    2 个 warp；这样 program 超过 SM 数的 4 倍时（输出很宽的 gate_up）改成 16 行、4 个 warp。
    M 更大时用 ``tl.dot``，4 个 warp、2 级流水：输出比输入宽时每个 program 64 行、一块 256 个元素，
    否则 32 行、512 个元素；program 不到 SM 数的 4 倍时沿 K 最多切 4 段。"""
    if m == 1:
        block_k = 1024
        split = max(1, k // block_k)
        if triton.cdiv(n, 8) * split > 4 * num_sms:
            return LinearConfig(16, block_k, split, num_warps=4, num_stages=2)
        return LinearConfig(8, block_k, split, num_warps=2, num_stages=2)
    block_n, block_k = (64, 256) if n > k else (32, 512)
    split = 1 if triton.cdiv(n, block_n) >= 4 * num_sms else min(4, max(1, k // block_k))
    return LinearConfig(block_n, block_k, split, num_warps=4, num_stages=2, dot=True)


def token_counts_to_warm_up() -> tuple[int, ...]:
    """``pick_config`` 对 M 只分两组：M = 1 和 M = 2～``MAX_M``（M 本身不参与特化）。一步只有
    1 个、2 个 token 的 prefill 各走一组（见 ``ops.warm_up_token_counts``）。"""
    return (1, 2)


@triton.jit
def _load_k(ptrs, start, rk, K, EVEN_K: tl.constexpr):
    """读一块 ``(行, BLOCK_K)``：第 ``start`` 个元素起；K 不是块的整数倍时，越过 K 的读 0。"""
    if EVEN_K:
        return tl.load(ptrs)
    else:
        return tl.load(ptrs, mask=(start + rk < K)[None, :], other=0.0)


@triton.jit(do_not_specialize=["M"])
def _linear_kernel(
    X, W, B, Y, P,
    M, N, K, chunk, stride_xm, stride_wn, stride_ym,
    HAS_BIAS: tl.constexpr, SPLIT: tl.constexpr, DOT: tl.constexpr, EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):  # fmt: skip
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    # 越界的行读第 (行号 % N) 行代替：读 W、x 时只剩 K 方向的掩码，写回时再丢掉这些行
    w_rows = (rn % N).to(tl.int64)
    x_rows = rm % M
    k0 = pid_k * chunk  # 本段的 K：[k0, k0 + chunk)，chunk 是 BLOCK_K 的整数倍
    w_ptrs = W + w_rows[:, None] * stride_wn + (k0 + rk)[None, :]
    x_ptrs = X + x_rows[:, None] * stride_xm + (k0 + rk)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # 权重和前面的 kernel 无关：依赖启动时先发出第一块权重的读，再等前一个 kernel 写完 x
    if PDL:
        gdc_launch_dependents()
    w = _load_k(w_ptrs, k0, rk, K, EVEN_K)
    if PDL:
        gdc_wait()
    for k in range(0, chunk, BLOCK_K):
        if k > 0:
            w = _load_k(w_ptrs, k0 + k, rk, K, EVEN_K)
        x = _load_k(x_ptrs, k0 + k, rk, K, EVEN_K)
        if DOT:
            acc += tl.dot(x, tl.trans(w), input_precision=PRECISION)
        elif BLOCK_M == 1:  # 一行 x：(1, BLOCK_K) 乘 (BLOCK_N, BLOCK_K)，按行求和，不摊成三维
            acc += tl.sum(w.to(tl.float32) * x.to(tl.float32), axis=1)[None, :]
        else:
            prod = x.to(tl.float32)[:, None, :] * w.to(tl.float32)[None, :, :]
            acc += tl.sum(prod, axis=2)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    out_mask = (rm < M)[:, None] & (rn < N)[None, :]
    if SPLIT:  # 部分和：P[pid_k, m, n]，由 _splitk_sum_kernel 按段的顺序相加
        p_ptrs = P + pid_k * M * N + rm[:, None] * N + rn[None, :]
        tl.store(p_ptrs, acc, mask=out_mask)
    else:
        if HAS_BIAS:
            acc += tl.load(B + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        y_ptrs = Y + rm[:, None] * stride_ym + rn[None, :]
        tl.store(y_ptrs, acc.to(Y.dtype.element_ty), mask=out_mask)


@triton.jit(do_not_specialize=["M"])
def _splitk_sum_kernel(
    P, B, Y, M, N, stride_ym,
    SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr, PRECISE: tl.constexpr,
    BLOCK: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    # 部分和 P[段, m, n] 按段的顺序相加。SILU 时 P 的每行有 2N 个数（前 N 个是 gate、后 N 个是
    # up）：gate 和 up 各自舍入成 Y 的 dtype，再就地做 SiLU 和乘——和先合并、再单独做 SiLU-mul
    # 的两个 kernel 逐位相同
    dependent_start(PDL)
    m = tl.program_id(0)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = rn < N
    width = 2 * N if SILU else N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    up = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):  # 固定的顺序：每次运行逐位相同
        row = P + (s * M + m) * width
        acc += tl.load(row + rn, mask=mask, other=0.0)
        if SILU:
            up += tl.load(row + N + rn, mask=mask, other=0.0)
    if HAS_BIAS:
        acc += tl.load(B + rn, mask=mask, other=0.0).to(tl.float32)
    dtype = Y.dtype.element_ty
    if SILU:
        y = silu_mul(acc.to(dtype), up.to(dtype), PRECISE)
    else:
        y = acc.to(dtype)
    tl.store(Y + m * stride_ym + rn, y, mask=mask)


def linear_small_m(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    config: LinearConfig | None = None,
) -> torch.Tensor:
    """``F.linear(x, weight, bias)``，x 是 ``(M, K)``、M 很小；float32 累加，输出 x 的 dtype。

    x、weight 的最后一维要连续（weight 就是按行存放的 ``(N, K)``），bias 是连续的 ``(N,)``。
    ``config`` 为 None 时由 ``pick_config`` 按形状挑。"""
    m, k = x.shape
    n = weight.shape[0]
    if weight.shape[1] != k or x.stride(-1) != 1 or weight.stride(-1) != 1:
        raise ValueError(f"bad shapes/strides: x {tuple(x.shape)}, weight {tuple(weight.shape)}")
    if bias is not None and (bias.shape != (n,) or bias.stride(-1) != 1):
        raise ValueError(f"bias must be a contiguous ({n},) vector")
    if not 1 <= m <= MAX_M:
        raise ValueError(f"M must be in [1, {MAX_M}], got {m}")
    cfg = config or pick_config(m, n, k, _num_sms(x.device))
    split = _num_splits(k, cfg)
    y = torch.empty(m, n, device=x.device, dtype=x.dtype)
    partial = torch.empty(split, m, n, device=x.device, dtype=torch.float32) if split > 1 else y
    _launch_gemv(x, weight, bias, y, partial, cfg, to_partial=split > 1)
    if split > 1:
        _splitk_sum_kernel[(m, triton.cdiv(n, _SUM_BLOCK))](
            partial, bias if bias is not None else y, y, m, n, y.stride(0),
            SPLIT_K=split, HAS_BIAS=bias is not None, SILU=False, PRECISE=False,
            BLOCK=_SUM_BLOCK, **dependent_launch(x),
        )  # fmt: skip
    return y


_SUM_BLOCK = 256  # 合并部分和时每个 program 算几个输出：N=1024 时也有 4 个 program


def _num_splits(k: int, cfg: LinearConfig) -> int:
    """K 实际切成几段：每段是 BLOCK_K 的整数倍，按段长重算段数，不留空段。"""
    return triton.cdiv(k, _chunk(k, cfg))


def _chunk(k: int, cfg: LinearConfig) -> int:
    return triton.cdiv(triton.cdiv(k, cfg.split_k), cfg.block_k) * cfg.block_k


def _launch_gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    partial: torch.Tensor,
    cfg: LinearConfig,
    to_partial: bool,
) -> None:
    """发出 ``_linear_kernel``：``to_partial`` 时每段 K 的 float32 部分和写进 ``partial``
    （``(段数, M, N)``，不加 bias），否则结果直接写进 ``y``。"""
    (m, k), n = x.shape, weight.shape[0]
    chunk = _chunk(k, cfg)
    _linear_kernel[(triton.cdiv(n, cfg.block_n), triton.cdiv(k, chunk))](
        x, weight, bias if bias is not None else y, y, partial,
        m, n, k, chunk, x.stride(0), weight.stride(0), y.stride(0),
        HAS_BIAS=bias is not None, SPLIT=to_partial, DOT=cfg.dot, EVEN_K=k % chunk == 0,
        PRECISION=_PRECISION.get(x.dtype, "tf32"),
        BLOCK_M=_DOT_M if cfg.dot else triton.next_power_of_2(m),
        BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **dependent_launch(x),
    )  # fmt: skip


# ---------------------------------------------------------------- GEMV 连 SiLU-mul

# M=1 的 gate_up 不切 K（输出宽，program 够多）：每个 program 8 个 gate 加 8 个 up，共 16 行 W、
# 2 个 warp。这个 kernel 的第一版在 H200 的整步 decode 里比过 16 个 gate、4 个 warp 的一组，
# 那一组慢一些（第 19 章第十五处）
SILU_CONFIG = LinearConfig(8, 1024, split_k=1, num_warps=2, num_stages=2)


@triton.jit
def _linear_silu_kernel(
    X, W, Y, N, K, stride_wn,
    EVEN_K: tl.constexpr, PRECISE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):  # fmt: skip
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    gate_rows = (rn % N).to(tl.int64)  # 越界的行读第 (行号 % N) 行代替，写回时丢掉
    g_ptrs = W + gate_rows[:, None] * stride_wn + rk[None, :]
    u_ptrs = W + (gate_rows + N)[:, None] * stride_wn + rk[None, :]  # 第 j 个 up 是第 N + j 行
    acc_g = tl.zeros((BLOCK_N,), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_N,), dtype=tl.float32)
    if PDL:  # 和 _linear_kernel 一样：先发出第一块权重的读，再等前一个 kernel 写完 x
        gdc_launch_dependents()
    for k in range(0, K, BLOCK_K):
        wg = _load_k(g_ptrs, k, rk, K, EVEN_K)
        wu = _load_k(u_ptrs, k, rk, K, EVEN_K)
        if PDL:
            if k == 0:
                gdc_wait()
        if EVEN_K:
            x = tl.load(X + k + rk)
        else:
            x = tl.load(X + k + rk, mask=k + rk < K, other=0.0)
        # x 是一维的一块，W 是 (BLOCK_N, BLOCK_K)：不像 _linear_kernel 那样为 M 多留一维
        xf = x.to(tl.float32)[None, :]
        acc_g += tl.sum(xf * wg.to(tl.float32), axis=1)
        acc_u += tl.sum(xf * wu.to(tl.float32), axis=1)
        g_ptrs += BLOCK_K
        u_ptrs += BLOCK_K
    dtype = Y.dtype.element_ty
    y = silu_mul(acc_g.to(dtype), acc_u.to(dtype), PRECISE)  # 先各自舍入成 x 的 dtype，同分开算
    tl.store(Y + rn, y, mask=rn < N)


def linear_silu_and_mul(
    x: torch.Tensor, weight: torch.Tensor, config: LinearConfig | None = None
) -> torch.Tensor:
    """``silu_and_mul(linear_small_m(x, weight))``：``weight`` 是合并的 ``(2I, K)``，前 I 行是
    gate、后 I 行是 up，x 是 ``(M, K)``、``1 <= M <= MAX_M``，输出 ``(M, I)``。

    x 只有一行（decode 一步一个 token）时是一个 kernel：每个 program 读 ``BLOCK_N`` 个 gate 和
    同样位置的 ``BLOCK_N`` 个 up，两行一起算完就地做 SiLU 和乘，``(1, 2I)`` 的中间结果不用写出去
    再读回来。``config`` 为 None 时用 ``SILU_CONFIG``；它不切 K、不用 ``tl.dot``。

    几行时先照常算 GEMV，只是部分和一律写进 float32 的缓冲（K 不切时也是一段），SiLU 和乘放进
    合并部分和的那个 kernel：一共两个 kernel，结果和分开算逐位相同。K 切段时（decode 的形状都切）
    比分开算少一个；不切时和分开算一样多。``config`` 是 GEMV 的参数，None 时由 ``pick_config``
    按形状挑。"""
    m, k = x.shape
    n = weight.shape[0]
    if not 1 <= m <= MAX_M or weight.shape[1] != k or n % 2:
        raise ValueError(f"bad shapes: x {tuple(x.shape)}, weight {tuple(weight.shape)}")
    if x.stride(-1) != 1 or weight.stride(-1) != 1:
        raise ValueError("x and weight must be contiguous along K")
    if m > 1:
        return _gemv_then_silu(x, weight, config or pick_config(m, n, k, _num_sms(x.device)))
    cfg = config or SILU_CONFIG
    if cfg.split_k != 1 or cfg.dot:
        raise ValueError("the fused kernel neither splits K nor uses tl.dot")
    inter = n // 2
    y = torch.empty(1, inter, device=x.device, dtype=x.dtype)
    _linear_silu_kernel[(triton.cdiv(inter, cfg.block_n),)](
        x, weight, y, inter, k, weight.stride(0),
        EVEN_K=k % cfg.block_k == 0, PRECISE=x.is_cuda,
        BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        enable_fp_fusion=False, **dependent_launch(x),
    )  # fmt: skip
    return y


def _gemv_then_silu(x: torch.Tensor, weight: torch.Tensor, cfg: LinearConfig) -> torch.Tensor:
    m, k = x.shape
    inter = weight.shape[0] // 2
    split = _num_splits(k, cfg)
    y = torch.empty(m, inter, device=x.device, dtype=x.dtype)
    partial = torch.empty(split, m, 2 * inter, device=x.device, dtype=torch.float32)
    _launch_gemv(x, weight, None, y, partial, cfg, to_partial=True)
    _splitk_sum_kernel[(m, triton.cdiv(inter, _SUM_BLOCK))](
        partial, y, y, m, inter, y.stride(0),
        SPLIT_K=split, HAS_BIAS=False, SILU=True, PRECISE=x.is_cuda, BLOCK=_SUM_BLOCK,
        enable_fp_fusion=False, **dependent_launch(x),
    )  # fmt: skip
    return y
