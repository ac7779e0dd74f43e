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
from triton.language.extra import libdevice

__all__ = ["apply_rope_inplace", "qk_norm_rope_inplace", "rmsnorm", "silu_and_mul", "store_cache"]

# GPU 上让 Triton 逐条按写法舍入：不把 ``a * b - c`` 合成一条 FMA（少一次舍入，结果就和 PyTorch
# 分开算的乘、减差一位）。解释器没有这回事，这个参数它也认。
_EXACT = {"enable_fp_fusion": False}


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
            HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(n), **_EXACT,
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
                HALF=half, BLOCK=triton.next_power_of_2(half), **_EXACT,
            )  # fmt: skip


# ---------------------------------------------------------------- q_norm + k_norm + RoPE


def _cache_rows(cos_sin_cache: torch.Tensor) -> int:
    if cos_sin_cache.dtype != torch.float32 or cos_sin_cache.stride(-1) != 1:
        raise ValueError("cos_sin_cache must be a contiguous float32 table")
    return cos_sin_cache.stride(0)


@triton.jit
def _norm_rope_head(
    X, W, cos, sin, eps,
    D: tl.constexpr, HALF: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr,
    REST: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    """一个头：先像 ``_rmsnorm_kernel`` 那样归一化，再像 ``_rope_kernel`` 那样旋转，中间不落地。"""
    cols = tl.arange(0, BLOCK_D)
    x = tl.load(X + cols, mask=cols < D, other=0.0)
    xf = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xf * xf, axis=0) / D + eps)  # 方差：整行一起求和，和 rmsnorm 一样
    # 旋转要成对的 (x1[i], x2[i])：按两半重新读一遍（刚读过，在缓存里），逐元素的算术和上面相同
    i = tl.arange(0, BLOCK_H)
    m = i < HALF
    x1 = tl.load(X + i, mask=m, other=0.0)
    x2 = tl.load(X + HALF + i, mask=m, other=0.0)
    w1 = tl.load(W + i, mask=m, other=0.0).to(tl.float32)
    w2 = tl.load(W + HALF + i, mask=m, other=0.0).to(tl.float32)
    # rmsnorm 的舍入：归一化后转回输入的 dtype，乘权重（float32）再转回；RoPE 从转回的值开始
    a = ((x1.to(tl.float32) * rstd).to(x.dtype).to(tl.float32) * w1).to(x.dtype).to(tl.float32)
    b = ((x2.to(tl.float32) * rstd).to(x.dtype).to(tl.float32) * w2).to(x.dtype).to(tl.float32)
    tl.store(X + i, (a * cos - b * sin).to(x.dtype), mask=m)
    tl.store(X + HALF + i, (b * cos + a * sin).to(x.dtype), mask=m)
    if REST > 0:  # rotary_dim < head_dim：后面的维度只归一化，不旋转
        r = tl.arange(0, BLOCK_R)
        mr = r < REST
        x3 = tl.load(X + 2 * HALF + r, mask=mr, other=0.0)
        w3 = tl.load(W + 2 * HALF + r, mask=mr, other=0.0).to(tl.float32)
        y3 = (x3.to(tl.float32) * rstd).to(x.dtype).to(tl.float32) * w3
        tl.store(X + 2 * HALF + r, y3.to(x.dtype), mask=mr)


@triton.jit
def _qk_norm_rope_kernel(
    Q, K, QW, KW, POS, CACHE,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_c, q_heads, eps,
    D: tl.constexpr, HALF: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr,
    REST: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)  # 前 q_heads 个是 q 的头，后面的是 k 的头
    i = tl.arange(0, BLOCK_H)
    pos = tl.load(POS + t).to(tl.int64)
    cos = tl.load(CACHE + pos * stride_c + i, mask=i < HALF, other=0.0)
    sin = tl.load(CACHE + pos * stride_c + HALF + i, mask=i < HALF, other=0.0)
    if h < q_heads:
        _norm_rope_head(
            Q + t * stride_qt + h * stride_qh, QW, cos, sin, eps,
            D, HALF, BLOCK_D, BLOCK_H, REST, BLOCK_R,
        )  # fmt: skip
    else:
        _norm_rope_head(
            K + t * stride_kt + (h - q_heads) * stride_kh, KW, cos, sin, eps,
            D, HALF, BLOCK_D, BLOCK_H, REST, BLOCK_R,
        )  # fmt: skip


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
    """``ops.qk_norm_rope_inplace`` 的 kernel 版：q、k 的每个头一个程序，整个只启动一次。"""
    stride_c = _cache_rows(cos_sin_cache)
    rotary_dim = cos_sin_cache.shape[-1]
    q = q.view(q.shape[0], -1, head_dim) if q.dim() == 2 else q
    k = k.view(k.shape[0], -1, head_dim) if k.dim() == 2 else k
    tokens, q_heads, sqt, sqh = _rows(q)
    k_tokens, k_heads, skt, skh = _rows(k)
    if k_tokens != tokens or q.shape[-1] != head_dim or k.shape[-1] != head_dim:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} do not match")
    half, rest = rotary_dim // 2, head_dim - rotary_dim
    if tokens * (q_heads + k_heads):
        _qk_norm_rope_kernel[(tokens, q_heads + k_heads)](
            q, k, q_weight, k_weight, positions, cos_sin_cache,
            sqt, sqh, skt, skh, stride_c, q_heads, eps,
            D=head_dim, HALF=half, BLOCK_D=triton.next_power_of_2(head_dim),
            BLOCK_H=triton.next_power_of_2(half), REST=rest,
            BLOCK_R=triton.next_power_of_2(max(rest, 1)), **_EXACT,
        )  # fmt: skip


# ---------------------------------------------------------------- silu_and_mul


@triton.jit
def _silu_and_mul_kernel(
    X, OUT, stride_x, stride_o, n, PRECISE: tl.constexpr, BLOCK: tl.constexpr
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n
    gate = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
    up = tl.load(X + row * stride_x + n + cols, mask=mask, other=0.0)
    g = gate.to(tl.float32)
    # PyTorch 的 silu：float32 里算 x / (1 + exp(-x))，转回输入的 dtype；乘 up 再转回一次
    if PRECISE:  # GPU：libdevice 的 expf 和 IEEE 除法，和 PyTorch 的 CUDA kernel 同一套
        e = libdevice.exp(-g)
    else:  # 解释器（libdevice 在那里没有实现）
        e = tl.exp(-g)
    s = tl.math.div_rn(g, 1.0 + e).to(gate.dtype)
    y = s.to(tl.float32) * up.to(tl.float32)
    tl.store(OUT + row * stride_o + cols, y.to(gate.dtype), mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``ops.silu_and_mul`` 的一个 kernel 版：``(…, 2I) -> (…, I)``，输出是新的连续张量。"""
    if x.stride(-1) != 1 or x.shape[-1] % 2:
        raise ValueError("the last dimension must be contiguous and even")
    n = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * n)  # 前面的维度摊平；连续时是视图
    out = torch.empty(*x.shape[:-1], n, dtype=x.dtype, device=x.device)
    if rows.shape[0] and n:
        block = min(triton.next_power_of_2(n), 256)  # 小块、多程序：decode 的一行也分到多个 SM
        _silu_and_mul_kernel[(rows.shape[0], triton.cdiv(n, block))](
            rows, out, rows.stride(0), n, n, PRECISE=x.is_cuda, BLOCK=block, **_EXACT
        )
    return out


# ---------------------------------------------------------------- KV 缓存的写入


@triton.jit
def _store_cache_kernel(
    K, V, KC, VC, IDX,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kct, stride_kch, stride_vct, stride_vch,
    D: tl.constexpr, N: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # 一行 = kv 头数 * head_dim 个数
    mask = offs < N
    h = offs // D
    d = offs % D
    slot = tl.load(IDX + t).to(tl.int64)
    k = tl.load(K + t * stride_kt + h * stride_kh + d, mask=mask)
    tl.store(KC + slot * stride_kct + h * stride_kch + d, k, mask=mask)
    v = tl.load(V + t * stride_vt + h * stride_vh + d, mask=mask)
    tl.store(VC + slot * stride_vct + h * stride_vch + d, v, mask=mask)


def store_cache(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
) -> None:
    """``ops.store_cache`` 的一个 kernel 版：K、V 一起写，每个 token 一个程序（行太长时再分块）。"""
    shape = k_cache.shape[1:]
    if v_cache.shape[1:] != shape or len(shape) != 2:
        raise ValueError(f"caches {tuple(k_cache.shape)}, {tuple(v_cache.shape)} do not match")
    k = k.reshape(k.shape[0], *shape)  # 二维的 (T, 头数 * head_dim) 当成三维；可能的话是视图
    v = v.reshape(v.shape[0], *shape)
    tokens, _, skt, skh = _rows(k)
    _, _, svt, svh = _rows(v)
    _, _, sct, sch = _rows(k_cache)
    _, _, vct, vch = _rows(v_cache)
    if indices.shape != (tokens,):
        raise ValueError(f"{tokens} tokens but indices of shape {tuple(indices.shape)}")
    n = shape[0] * shape[1]
    if tokens and n:
        block = min(triton.next_power_of_2(n), 4096)
        _store_cache_kernel[(tokens, triton.cdiv(n, block))](
            k, v, k_cache, v_cache, indices,
            skt, skh, svt, svh, sct, sch, vct, vch,
            D=shape[1], N=n, BLOCK=block,
        )  # fmt: skip
