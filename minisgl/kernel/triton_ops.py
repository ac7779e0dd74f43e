"""RMSNorm（可以先加残差）和 RoPE 的 Triton 版，各一个 kernel。

剖析 decode 的一步：CUDA Graph 已经省掉了启动 kernel 的 CPU 时间，但 GPU 上每个
kernel 至少也要一两微秒。``ops.py`` 里的 PyTorch 写法，一次 RMSNorm 是 6、7 个小 kernel（转
float32、平方、求均值、rsqrt、乘、转回、乘权重），一次 RoPE 十几个；每层 4 次 RMSNorm（输入、
注意力之后、q_norm、k_norm）加一次 RoPE，28 层就是一千多个小 kernel。这里每个都只启动一次：
每个程序拿几行（一个 token 的一个头，或者一个 token 的整个隐藏向量）读进寄存器，算完写回。

舍入的顺序和 ``ops.py`` 一样（那里的 PyTorch 写法就是规格）：残差在输入的 dtype 里相加；方差在
float32 里算；归一化后先转回输入的 dtype，再乘权重；RoPE 在 float32 里转，写回时转回。

这个模块直接 ``import triton``：``ops.py`` 只在装了 triton 时导入它，只在 CUDA 张量上调用它。
没有 GPU 的机器上测试用 Triton 的解释器调用同样的函数。
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from minisgl.env import ENV

try:  # 依赖启动要的两条指令；没有它们的老版本 triton 就不用依赖启动
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:
    gdc_launch_dependents = gdc_wait = None

__all__ = [
    "apply_rope_inplace",
    "dependent_launch",
    "dependent_start",
    "prefetch_l2",
    "without_dependent_launch",
    "qk_norm_rope_inplace",
    "qk_norm_rope_store",
    "rmsnorm",
    "silu_and_mul",
    "silu_mul",
    "store_cache",
    "token_counts_to_warm_up",
]

# GPU 上让 Triton 逐条按写法舍入：不把 ``a * b - c`` 合成一条 FMA（少一次舍入，结果就和 PyTorch
# 分开算的乘、减差一位）。解释器没有这回事，这个参数它也认。
_EXACT = {"enable_fp_fusion": False}
# 按行处理的 kernel 每个程序大约读多少个数：（这一步至少多少个 token，读多少个数），见 _block_rows
ROW_ELEMENTS = ((1, 512), (64, 1024), (512, 4096))


@functools.cache
def _dependent_launch_on(device: torch.device) -> bool:
    if device.type != "cuda" or gdc_wait is None or ENV.DISABLE_PDL:
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


_suppressed = 0  # 套了几层 without_dependent_launch（见下）


def dependent_launch(x: torch.Tensor) -> dict[str, bool]:
    """启动 kernel 时多给的参数：Hopper（sm_90）起的 GPU 上打开"依赖启动"（programmatic
    dependent launch，PDL）。

    同一个流里的 kernel 本来是一个完全结束、下一个才开始启动。打开之后，前一个 kernel 的每个
    程序一开始就发出信号（``gdc_launch_dependents``），下一个 kernel 于是在前一个还在算的时候
    就被排上 SM，先做不依赖前一个结果的事（线性层先读自己的权重），然后在 ``gdc_wait`` 处等
    前一个 kernel 整个结束、写的东西都看得见了再往下走。decode 的一步是三百多个各几微秒的
    kernel 首尾相接，每个的启动和"第一次读显存要等的那一下"都能藏进前一个里。

    规矩只有一条：打开了它的 kernel，读写前一个 kernel 碰过的内存之前必须先 ``gdc_wait``。
    前一个 kernel 自己也可能还没等到它的前一个，所以等之前只能读这一步里没有 kernel 写的东西：
    权重、主机在这一步之前写好的元数据。这里的 kernel 都在开头等（线性层在发出第一块权重的读
    之后，decode 注意力在把第一块 K/V 预取进 L2 之后）。

    只在录 decode 的 CUDA Graph 时打开：好处全在 decode 那串几微秒的小 kernel 上；prefill 是大
    kernel，前一个还没算完，下一个的程序就占着 SM 空等，H200 上 prefill 反而慢 4～8 %——所以不录图
    时不开，录 prefill 的图时也不开（``without_dependent_launch``）。支不支持按设备决定一次；
    ``MINISGL_DISABLE_PDL=1`` 关掉它，用来对比。"""
    on = _suppressed == 0 and _dependent_launch_on(x.device)
    if on and torch.cuda.is_current_stream_capturing():
        return {"PDL": True, "launch_pdl": True}
    return {"PDL": False}


@contextlib.contextmanager
def without_dependent_launch() -> Iterator[None]:
    """这段时间里录下的图不开依赖启动（``engine/prefill_graph.py`` 录 prefill 的图时用）。"""
    global _suppressed
    _suppressed += 1
    try:
        yield
    finally:
        _suppressed -= 1


@triton.jit
def prefetch_l2(ptrs):
    """把这些地址所在的缓存行从显存拉进 L2，不等、不占放数据的寄存器（PTX 的
    ``prefetch.global.L2``）。只在 GPU 上编译：解释器不认识 PTX，调用方只在依赖启动时用它。"""
    tl.inline_asm_elementwise(
        "prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [ptrs],
        dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def dependent_start(PDL: tl.constexpr):
    """打开依赖启动时每个 kernel 开头的两步：让下一个 kernel 可以开始启动，再等上一个结束。"""
    if PDL:
        gdc_launch_dependents()
        gdc_wait()


@triton.jit
def _row_offsets(R0, total, heads, stride_t, stride_h, ROWS: tl.constexpr):
    """第 R0 行起的 ``ROWS`` 行：每行的起始偏移和有效掩码。三维的 (token, 头, 维) 也当成一行一行：
    第 r 行是 token ``r // heads`` 的第 ``r % heads`` 个头。"""
    r = R0 + tl.arange(0, ROWS)
    t = (r // heads).to(tl.int64)
    return t, t * stride_t + (r % heads) * stride_h, r < total


@triton.jit
def _rstd(x, n, eps):
    """一块 ``(ROWS, BLOCK)`` 的每一行的 ``1 / sqrt(mean(x²) + eps)``，float32。
    rmsnorm 和 q/k 的合并 kernel 都用它：块的形状相同时，求和的顺序（归约树）也相同，
    两者的结果逐位一样。"""
    xf = x.to(tl.float32)
    return tl.rsqrt(tl.sum(xf * xf, axis=1) / n + eps)


# token 数每一步都在变：不让 Triton 按它特化（是不是 1、是不是 16 的倍数），免得服务中途现编译
@triton.jit(do_not_specialize=["total"])
def _rmsnorm_kernel(
    X, RES, W, OUT,
    stride_xt, stride_xh, stride_rt, stride_rh, stride_ot, stride_oh,
    total, heads, n, eps,
    HAS_RESIDUAL: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    dependent_start(PDL)
    R0 = tl.program_id(0).to(tl.int64) * ROWS
    t, xo, rmask = _row_offsets(R0, total, heads, stride_xt, stride_xh, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = rmask[:, None] & (cols < n)[None, :]
    x = tl.load(X + xo[:, None] + cols[None, :], mask=mask, other=0.0)
    if HAS_RESIDUAL:  # residual ← x + residual（输入的 dtype），之后归一化的是它
        _, ro, _ = _row_offsets(R0, total, heads, stride_rt, stride_rh, ROWS)
        r = tl.load(RES + ro[:, None] + cols[None, :], mask=mask, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(r.dtype)
        tl.store(RES + ro[:, None] + cols[None, :], x, mask=mask)
    normed = (x.to(tl.float32) * _rstd(x, n, eps)[:, None]).to(x.dtype)
    w = tl.load(W + cols, mask=cols < n, other=0.0)
    y = normed.to(tl.float32) * w.to(tl.float32)[None, :]
    _, oo, _ = _row_offsets(R0, total, heads, stride_ot, stride_oh, ROWS)
    tl.store(OUT + oo[:, None] + cols[None, :], y.to(OUT.dtype.element_ty), mask=mask)


def _rows(x: torch.Tensor) -> tuple[int, int, int, int]:
    """（token 数，头数，token 的步长，头的步长）：二维的 ``(T, n)`` 当成只有一个头。"""
    if x.stride(-1) != 1:
        raise ValueError("the last dimension must be contiguous")
    if x.dim() == 2:
        return x.shape[0], 1, x.stride(0), 0
    if x.dim() == 3:
        return x.shape[0], x.shape[1], x.stride(0), x.stride(1)
    raise ValueError(f"expected 2 or 3 dims, got {tuple(x.shape)}")


def _check_indices(indices: torch.Tensor, tokens: int) -> None:
    """写 KV 的槽位：每个 token 一个，``(T,)``。"""
    if indices.shape != (tokens,):
        raise ValueError(f"{tokens} tokens but indices of shape {tuple(indices.shape)}")


def _block_rows(block: int, tokens: int) -> int:
    """一个程序处理几行。token 多时凑够约 4096 个数：一行（一个头，128 个数）一个程序时，prefill
    的 64 × 512 个 token 要启动 78 万个程序，每个只读 256 字节，时间都花在调度和等内存上；一个程序
    多拿几行，一次发出的读就多。token 少时（decode）只凑约 512 或 1024 个数：行本来就少，块大了
    程序就少，每个程序的活都排在一条关键路径上（batch 1 时隐藏层一块 4 行、有 3 行是空的），一步里
    几十个这样的 kernel 加起来很可观（第 19 章第二十六处）。rmsnorm 和合并的 q/k kernel 对同样宽
    的行、同样的 token 数用同样的块。"""
    elements = next(size for least, size in reversed(ROW_ELEMENTS) if tokens >= least)
    return max(1, min(elements // block, 64))


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
    block = triton.next_power_of_2(n)
    rows = _block_rows(block, tokens)
    if tokens * heads:
        _rmsnorm_kernel[(triton.cdiv(tokens * heads, rows),)](
            x, residual if residual is not None else x, weight, out,
            sxt, sxh, srt, srh, sot, soh, tokens * heads, heads, n, eps,
            HAS_RESIDUAL=residual is not None, ROWS=rows, BLOCK=block,
            **_EXACT, **dependent_launch(x),
        )  # fmt: skip
    return out


@triton.jit
def _rope_kernel(
    X, POS, CACHE, stride_xt, stride_xh, stride_c,
    HALF: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    dependent_start(PDL)
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
                HALF=half, BLOCK=triton.next_power_of_2(half), **_EXACT, **dependent_launch(x),
            )  # fmt: skip


# ---------------------------------------------------------------- q_norm + k_norm + RoPE


def _cache_rows(cos_sin_cache: torch.Tensor) -> int:
    if cos_sin_cache.dtype != torch.float32 or cos_sin_cache.stride(-1) != 1:
        raise ValueError("cos_sin_cache must be a contiguous float32 table")
    return cos_sin_cache.stride(0)


@triton.jit
def _norm_rope_rows(
    X, W, POS, CACHE, R0, total, heads, stride_t, stride_h, stride_c, eps,
    KV, IDX, stride_st, stride_sh,
    D: tl.constexpr, HALF: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr,
    REST: tl.constexpr, BLOCK_R: tl.constexpr, ROWS: tl.constexpr, STORE: tl.constexpr,
):  # fmt: skip
    """``ROWS`` 个头：先像 ``_rmsnorm_kernel`` 那样归一化，再像 ``_rope_kernel`` 那样旋转，
    中间不落地。``STORE`` 时结果同时写进 KV 池 ``KV`` 的槽位 ``IDX[token]``（k 的行）。"""
    t, xo, rmask = _row_offsets(R0, total, heads, stride_t, stride_h, ROWS)
    base = X + xo[:, None]
    if STORE:  # 同一行在池子里的位置：槽位 IDX[t]、第 r % heads 个头
        slot = tl.load(IDX + t, mask=rmask, other=0).to(tl.int64)
        head = (R0 + tl.arange(0, ROWS)) % heads
        dst = KV + (slot * stride_st + head * stride_sh)[:, None]
    cols = tl.arange(0, BLOCK_D)
    x = tl.load(base + cols[None, :], mask=rmask[:, None] & (cols < D)[None, :], other=0.0)
    rstd = _rstd(x, D, eps)[:, None]  # 方差：整行一起求和，和 rmsnorm 同样的块、同样的顺序
    # 旋转要成对的 (x1[i], x2[i])：按两半重新读一遍（刚读过，在缓存里），逐元素的算术和上面相同
    i = tl.arange(0, BLOCK_H)
    m = rmask[:, None] & (i < HALF)[None, :]
    pos = tl.load(POS + t, mask=rmask, other=0).to(tl.int64)
    row_c = CACHE + pos[:, None] * stride_c + i[None, :]
    cos = tl.load(row_c, mask=m, other=0.0)
    sin = tl.load(row_c + HALF, mask=m, other=0.0)
    x1 = tl.load(base + i[None, :], mask=m, other=0.0)
    x2 = tl.load(base + HALF + i[None, :], mask=m, other=0.0)
    w1 = tl.load(W + i, mask=i < HALF, other=0.0).to(tl.float32)[None, :]
    w2 = tl.load(W + HALF + i, mask=i < HALF, other=0.0).to(tl.float32)[None, :]
    # rmsnorm 的舍入：归一化后转回输入的 dtype，乘权重（float32）再转回；RoPE 从转回的值开始
    a = ((x1.to(tl.float32) * rstd).to(x.dtype).to(tl.float32) * w1).to(x.dtype).to(tl.float32)
    b = ((x2.to(tl.float32) * rstd).to(x.dtype).to(tl.float32) * w2).to(x.dtype).to(tl.float32)
    y1 = (a * cos - b * sin).to(x.dtype)
    y2 = (b * cos + a * sin).to(x.dtype)
    tl.store(base + i[None, :], y1, mask=m)
    tl.store(base + HALF + i[None, :], y2, mask=m)
    if STORE:
        tl.store(dst + i[None, :], y1, mask=m)
        tl.store(dst + HALF + i[None, :], y2, mask=m)
    if REST > 0:  # rotary_dim < head_dim：后面的维度只归一化，不旋转
        r = tl.arange(0, BLOCK_R)
        mr = rmask[:, None] & (r < REST)[None, :]
        x3 = tl.load(base + 2 * HALF + r[None, :], mask=mr, other=0.0)
        w3 = tl.load(W + 2 * HALF + r, mask=r < REST, other=0.0).to(tl.float32)[None, :]
        y3 = ((x3.to(tl.float32) * rstd).to(x.dtype).to(tl.float32) * w3).to(x.dtype)
        tl.store(base + 2 * HALF + r[None, :], y3, mask=mr)
        if STORE:
            tl.store(dst + 2 * HALF + r[None, :], y3, mask=mr)


@triton.jit(do_not_specialize=["tokens", "q_programs", "k_programs"])  # 同 _rmsnorm_kernel 的 total
def _qk_norm_rope_kernel(
    Q, K, V, QW, KW, POS, CACHE, KC, VC, IDX,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_c,
    stride_kct, stride_kch, stride_vct, stride_vch,
    tokens, q_heads, k_heads, q_programs, k_programs, eps,
    D: tl.constexpr, HALF: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr,
    REST: tl.constexpr, BLOCK_R: tl.constexpr, ROWS: tl.constexpr, STORE: tl.constexpr,
    PDL: tl.constexpr,
):  # fmt: skip
    """前 ``q_programs`` 个程序处理 q 的行，接着 ``k_programs`` 个处理 k 的行。``STORE`` 时 k 的
    结果顺手写进 K 池，再多 ``k_programs`` 个程序把 v 原样拷进 V 池——写 KV 不再单独启动。"""
    dependent_start(PDL)
    p = tl.program_id(0)
    if p < q_programs:
        _norm_rope_rows(
            Q, QW, POS, CACHE, p.to(tl.int64) * ROWS, tokens * q_heads, q_heads,
            stride_qt, stride_qh, stride_c, eps, KC, IDX, stride_kct, stride_kch,
            D, HALF, BLOCK_D, BLOCK_H, REST, BLOCK_R, ROWS, False,
        )  # fmt: skip
    elif p < q_programs + k_programs:
        _norm_rope_rows(
            K, KW, POS, CACHE, (p - q_programs).to(tl.int64) * ROWS, tokens * k_heads, k_heads,
            stride_kt, stride_kh, stride_c, eps, KC, IDX, stride_kct, stride_kch,
            D, HALF, BLOCK_D, BLOCK_H, REST, BLOCK_R, ROWS, STORE,
        )  # fmt: skip
    elif STORE:
        r0 = (p - q_programs - k_programs).to(tl.int64) * ROWS
        t, vo, rmask = _row_offsets(r0, tokens * k_heads, k_heads, stride_vt, stride_vh, ROWS)
        slot = tl.load(IDX + t, mask=rmask, other=0).to(tl.int64)
        head = (r0 + tl.arange(0, ROWS)) % k_heads
        cols = tl.arange(0, BLOCK_D)
        mask = rmask[:, None] & (cols < D)[None, :]
        v = tl.load(V + vo[:, None] + cols[None, :], mask=mask, other=0.0)
        dst = VC + (slot * stride_vct + head * stride_vch)[:, None] + cols[None, :]
        tl.store(dst, v, mask=mask)


def _heads(x: torch.Tensor, head_dim: int) -> torch.Tensor:
    """二维的 ``(T, 头数 * head_dim)`` 看成三维的 ``(T, 头数, head_dim)``（视图）。"""
    return x.view(x.shape[0], -1, head_dim) if x.dim() == 2 else x


def _launch_qk_norm_rope(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float,
    cos_sin_cache: torch.Tensor,
    head_dim: int,
    store: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None,
) -> None:
    """``store`` 是 ``(v, k_cache, v_cache, indices)``，None 时只做归一化和 RoPE。"""
    stride_c = _cache_rows(cos_sin_cache)
    rotary_dim = cos_sin_cache.shape[-1]
    q, k = _heads(q, head_dim), _heads(k, head_dim)
    tokens, q_heads, sqt, sqh = _rows(q)
    k_tokens, k_heads, skt, skh = _rows(k)
    if k_tokens != tokens or q.shape[-1] != head_dim or k.shape[-1] != head_dim:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} do not match")
    v, k_cache, v_cache, indices = store if store is not None else (k, k, k, positions)
    v = _heads(v, head_dim)
    if store is not None and (
        v.shape != k.shape or k_cache.shape[1:] != k.shape[1:] or v_cache.shape != k_cache.shape
    ):
        raise ValueError(f"k {tuple(k.shape)}, v {tuple(v.shape)} and the caches do not match")
    if store is not None:
        _check_indices(indices, tokens)
    _, _, svt, svh = _rows(v)
    _, _, kct, kch = _rows(k_cache)
    _, _, vct, vch = _rows(v_cache)
    half, rest = rotary_dim // 2, head_dim - rotary_dim
    block_d = triton.next_power_of_2(head_dim)
    rows = _block_rows(block_d, tokens)
    q_programs = triton.cdiv(tokens * q_heads, rows)
    k_programs = triton.cdiv(tokens * k_heads, rows)
    grid = q_programs + k_programs * (2 if store is not None else 1)
    if tokens * (q_heads + k_heads):
        _qk_norm_rope_kernel[(grid,)](
            q, k, v, q_weight, k_weight, positions, cos_sin_cache, k_cache, v_cache, indices,
            sqt, sqh, skt, skh, svt, svh, stride_c, kct, kch, vct, vch,
            tokens, q_heads, k_heads, q_programs, k_programs, eps,
            D=head_dim, HALF=half, BLOCK_D=block_d,
            BLOCK_H=triton.next_power_of_2(half), REST=rest,
            BLOCK_R=triton.next_power_of_2(max(rest, 1)), ROWS=rows, STORE=store is not None,
            **_EXACT, **dependent_launch(q),
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
    """``ops.qk_norm_rope_inplace`` 的 kernel 版：q、k 的头按块分给程序，整个只启动一次。"""
    _launch_qk_norm_rope(positions, q, k, q_weight, k_weight, eps, cos_sin_cache, head_dim, None)


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
    """``ops.qk_norm_rope_store`` 的 kernel 版：同上，再把 k（归一化、旋转之后的）和 v 写进
    ``(槽位数, kv 头数, head_dim)`` 的 K、V 池的槽位 ``indices``，还是只启动一次。"""
    store = (v, k_cache, v_cache, indices)
    _launch_qk_norm_rope(positions, q, k, q_weight, k_weight, eps, cos_sin_cache, head_dim, store)


# ---------------------------------------------------------------- silu_and_mul


@triton.jit
def silu_mul(gate, up, PRECISE: tl.constexpr):
    """``silu(gate) * up``，结果是 gate 的 dtype。舍入和 PyTorch 的 ``F.silu(gate) * up`` 一样：
    float32 里算 x / (1 + exp(-x))，转回输入的 dtype；乘 up 再转回一次。"""
    g = gate.to(tl.float32)
    if PRECISE:  # GPU：libdevice 的 expf 和 IEEE 除法，和 PyTorch 的 CUDA kernel 同一套
        e = libdevice.exp(-g)
    else:  # 解释器（libdevice 在那里没有实现）
        e = tl.exp(-g)
    s = tl.math.div_rn(g, 1.0 + e).to(gate.dtype)
    return (s.to(tl.float32) * up.to(tl.float32)).to(gate.dtype)


@triton.jit
def _silu_and_mul_kernel(
    X, OUT, stride_x, stride_o, n,
    PRECISE: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    dependent_start(PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n
    gate = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
    up = tl.load(X + row * stride_x + n + cols, mask=mask, other=0.0)
    tl.store(OUT + row * stride_o + cols, silu_mul(gate, up, PRECISE), mask=mask)


# 每个程序算几个数，按行数分档：（这一档最少的行数，块大小）
_SILU_BLOCKS = ((1, 256), (64, 512), (512, 1024))


def _silu_block(rows: int) -> int:
    """每个程序算几个数。decode 的一两行要切成小块才分得到多个 SM；行多时块小了程序太多，
    调度它们比读写本身还费时间（H200 上 16384 行 × 3072：256 个一块 237 µs，1024 个 72 µs）。"""
    return next(block for least, block in reversed(_SILU_BLOCKS) if rows >= least)


def token_counts_to_warm_up() -> tuple[int, ...]:
    """一步的 token 数分这几档，每档 kernel 的编译期参数不一样（SiLU-mul 的块、按行处理的 kernel
    每个程序拿几行都随它变）。引擎启动时每档跑一次 prefill，这些 kernel 就在服务之前编译好，
    不在服务中途让一步停下来。"""
    return tuple(sorted({least for least, _ in (*_SILU_BLOCKS, *ROW_ELEMENTS)}))


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``ops.silu_and_mul`` 的一个 kernel 版：``(…, 2I) -> (…, I)``，输出是新的连续张量。"""
    if x.stride(-1) != 1 or x.shape[-1] % 2:
        raise ValueError("the last dimension must be contiguous and even")
    n = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * n)  # 前面的维度摊平；连续时是视图
    out = torch.empty(*x.shape[:-1], n, dtype=x.dtype, device=x.device)
    if rows.shape[0] and n:
        block = min(triton.next_power_of_2(n), _silu_block(rows.shape[0]))
        _silu_and_mul_kernel[(rows.shape[0], triton.cdiv(n, block))](
            rows, out, rows.stride(0), n, n, PRECISE=x.is_cuda, BLOCK=block,
            **_EXACT, **dependent_launch(x),
        )  # fmt: skip
    return out


# ---------------------------------------------------------------- KV 缓存的写入


@triton.jit
def _store_cache_kernel(
    K, V, KC, VC, IDX,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kct, stride_kch, stride_vct, stride_vch,
    D: tl.constexpr, N: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    dependent_start(PDL)
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
    _check_indices(indices, tokens)
    n = shape[0] * shape[1]
    if tokens and n:
        block = min(triton.next_power_of_2(n), 4096)
        _store_cache_kernel[(tokens, triton.cdiv(n, block))](
            k, v, k_cache, v_cache, indices,
            skt, skh, svt, svh, sct, sch, vct, vch,
            D=shape[1], N=n, BLOCK=block, **dependent_launch(k),
        )  # fmt: skip
