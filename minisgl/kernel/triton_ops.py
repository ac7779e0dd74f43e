"""RMSNorm（可以先加残差）和 RoPE 的 Triton 版，各一个 kernel。

剖析 decode 的一步：CUDA Graph 已经省掉了启动 kernel 的 CPU 时间，但 GPU 上每个
kernel 至少也要一两微秒。``ops.py`` 里的 PyTorch 写法，一次 RMSNorm 是 6、7 个小 kernel（转
float32、平方、求均值、rsqrt、乘、转回、乘权重），一次 RoPE 十几个；每层 4 次 RMSNorm（输入、
注意力之后、q_norm、k_norm）加一次 RoPE，28 层就是一千多个小 kernel。这里每个都只启动一次：
一行（一个 token 的一个头）读进寄存器，算完写回。

舍入的顺序和 ``ops.py`` 一样（那里的 PyTorch 写法就是规格）：残差在输入的 dtype 里相加；方差在
float32 里算；归一化后先转回输入的 dtype，再乘权重；RoPE 在 float32 里转，写回时转回。

这个模块直接 ``import triton``：``ops.py`` 只在装了 triton 时导入它，只在 CUDA 张量上调用它。
没有 GPU 的机器上测试用 Triton 的解释器调用同样的函数。
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["apply_rope_inplace", "rmsnorm"]


@triton.jit
def _rmsnorm_kernel(
    X, RES, W, OUT,
    stride_xt, stride_xh, stride_rt, stride_rh, stride_ot, stride_oh,
    heads, n, eps,
    HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    t = row // heads  # 三维的 (token, 头, 维) 也当成一行一行：第 row 行是 token t 的第 h 个头
    h = row % heads
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(X + t * stride_xt + h * stride_xh + cols, mask=mask, other=0.0)
    if HAS_RESIDUAL:  # residual ← x + residual（输入的 dtype），之后归一化的是它
        r = tl.load(RES + t * stride_rt + h * stride_rh + cols, mask=mask, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(r.dtype)
        tl.store(RES + t * stride_rt + h * stride_rh + cols, x, mask=mask)
    xf = x.to(tl.float32)
    var = tl.sum(xf * xf, axis=0) / n
    normed = (xf * tl.rsqrt(var + eps)).to(x.dtype)
    w = tl.load(W + cols, mask=mask, other=0.0)
    y = normed.to(tl.float32) * w.to(tl.float32)
    tl.store(OUT + t * stride_ot + h * stride_oh + cols, y.to(OUT.dtype.element_ty), mask=mask)


def _rows(x: torch.Tensor) -> tuple[int, int, int, int]:
    """（token 数，头数，token 的步长，头的步长）：二维的 ``(T, n)`` 当成只有一个头。"""
    if x.stride(-1) != 1:
        raise ValueError("the last dimension must be contiguous")
    if x.dim() == 2:
        return x.shape[0], 1, x.stride(0), 0
    if x.dim() == 3:
        return x.shape[0], x.shape[1], x.stride(0), x.stride(1)
    raise ValueError(f"expected 2 or 3 dims, got {tuple(x.shape)}")


def rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    *,
    out: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """``ops.rmsnorm`` 的一个 kernel 版；给了 ``residual`` 时就是 ``ops.fused_add_rmsnorm``：
    先 ``residual += x``，再把归一化的结果写进 ``out``。``out`` 可以就是 ``x``。"""
    tokens, heads, sxt, sxh = _rows(x)
    out = torch.empty_like(x) if out is None else out
    _, _, sot, soh = _rows(out)
    srt, srh = _rows(residual)[2:] if residual is not None else (0, 0)
    n = x.shape[-1]
    if tokens * heads:
        _rmsnorm_kernel[(tokens * heads,)](
            x, residual if residual is not None else x, weight, out,
            sxt, sxh, srt, srh, sot, soh, heads, n, eps,
            HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(n),
        )  # fmt: skip
    return out


@triton.jit
def _rope_kernel(
    X, POS, CACHE, stride_xt, stride_xh, stride_c,
    HALF: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    t = tl.program_id(0)
    h = tl.program_id(1)
    i = tl.arange(0, BLOCK)
    mask = i < HALF
    pos = tl.load(POS + t).to(tl.int64)
    cos = tl.load(CACHE + pos * stride_c + i, mask=mask, other=0.0)
    sin = tl.load(CACHE + pos * stride_c + HALF + i, mask=mask, other=0.0)
    base = X + t * stride_xt + h * stride_xh
    x1 = tl.load(base + i, mask=mask, other=0.0)
    x2 = tl.load(base + HALF + i, mask=mask, other=0.0)
    a = x1.to(tl.float32)
    b = x2.to(tl.float32)
    tl.store(base + i, (a * cos - b * sin).to(x1.dtype), mask=mask)
    tl.store(base + HALF + i, (b * cos + a * sin).to(x1.dtype), mask=mask)


def apply_rope_inplace(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    head_dim: int,
) -> None:
    """``ops.apply_rope_inplace`` 的 kernel 版：q、k 各一个 kernel，网格是 (token, 头)。"""
    rotary_dim = cos_sin_cache.shape[-1]
    if cos_sin_cache.dtype != torch.float32 or cos_sin_cache.stride(-1) != 1:
        raise ValueError("cos_sin_cache must be a contiguous float32 table")
    half = rotary_dim // 2
    for x in (q, k):
        x = x.view(x.shape[0], -1, head_dim) if x.dim() == 2 else x
        tokens, heads, st, sh = _rows(x)
        if tokens * heads:
            _rope_kernel[(tokens, heads)](
                x, positions, cos_sin_cache, st, sh, cos_sin_cache.stride(0),
                HALF=half, BLOCK=triton.next_power_of_2(half),
            )  # fmt: skip
