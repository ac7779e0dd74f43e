"""Triton 分页注意力的三个 kernel（调用它们的包装函数和后端在 ``triton_attn.py``）。

这个模块直接 ``import triton``：只有装了 triton 时才会被导入（``triton_attn.py`` 里的 try）。
参数的约定：``Q``/``OUT`` 是 ``(token, 头, D)``，``K``/``V`` 是摊平成 ``(槽位, kv 头, D)`` 的
KV 池，``PT`` 是页表（每行一个请求，第 pos 列是第 pos 个 token 的槽位）；``stride_*`` 是步长。
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["_decode_partial_kernel", "_decode_reduce_kernel", "_extend_kernel"]


# >> ch19
from minisgl.kernel.triton_ops import (  # 依赖启动（第 19 章）
    dependent_start,
    gdc_launch_dependents,
    gdc_wait,
    prefetch_l2,
)


@triton.jit
def _prefetch_first_block(
    K, V, PT, row, kvh, start, end, stride_kt, stride_kh, stride_pt,
    D: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """依赖启动时 decode 注意力在 ``gdc_wait`` 之前做的事：页表、长度是主机在这一步之前写好的，
    可以先读；这一段第一块的 K/V 从显存拉进 L2，等完了再读就近取。每 128 字节（64 个 16 位的
    数）预取一次，数据不进寄存器。这一步的新 token 是前一个 kernel 正在写的那一行：L2 是所有
    SM 的写都要经过的地方，先预取再被写，读到的也是新值。"""
    offs_n = start + tl.arange(0, BLOCK_N)
    slot = tl.load(PT + row * stride_pt + offs_n, mask=offs_n < end, other=0).to(tl.int64)
    if D >= 64:
        lines = tl.arange(0, D // 64) * 64
    else:  # 一行不到 128 字节
        lines = tl.arange(0, 1)
    offs = slot[:, None] * stride_kt + kvh * stride_kh + lines[None, :]
    prefetch_l2(K + offs)
    prefetch_l2(V + offs)


# << ch19
@triton.jit
def _extend_step(
    acc, l_i, m_i, q, K, V, PT, row, kvh, n, kv_end, pos_q,
    stride_kt, stride_kh, stride_pt, qk_scale,
    D: tl.constexpr, BLOCK_N: tl.constexpr, IEEE: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    """online softmax 的一步：读第 ``n`` 个 token 起的一块 K/V，更新 (acc, l, m)。
    ``MASKED`` 为 False 的块整块都看得见，省掉掩码的比较和 where。

    分数按以 2 为底算：``qk_scale`` 里已经乘了 log2(e)，``exp2(s - m)`` 就是原来的
    ``exp(s·scale - m')``，``m``、``l`` 也都是这个底下的，最后的 ``acc / l`` 不变。
    ``exp2`` 是一条硬件指令，``exp`` 还要先乘一次 log2(e)。"""
    offs_d = tl.arange(0, D)
    offs_n = n + tl.arange(0, BLOCK_N)
    n_mask = offs_n < kv_end
    slot = tl.load(PT + row * stride_pt + offs_n, mask=n_mask, other=0).to(tl.int64)
    kv_offs = slot[:, None] * stride_kt + kvh * stride_kh + offs_d[None, :]
    k = tl.load(K + kv_offs, mask=n_mask[:, None], other=0.0)
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    s = s * qk_scale
    if MASKED:
        visible = (offs_n[None, :] <= pos_q[:, None]) & n_mask[None, :]
        s = tl.where(visible, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    # 防御：一整行都看不到时 m_new 还是 -inf，用 0 代替免得 nan（实际不会发生：位置 0
    # 对每个 q 都可见，第一块就让 m_new 有限）
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - m_safe[:, None])
    alpha = tl.math.exp2(m_i - m_safe)
    v = tl.load(V + kv_offs, mask=n_mask[:, None], other=0.0)
    l_i = l_i * alpha + tl.sum(p, 1)
    if IEEE:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, l_i, m_new


@triton.jit
def _extend_kernel(
    Q, K, V, OUT, PT, ROWS, CU_Q, CACHED, WORK,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_ot, stride_oh, stride_pt,
    qk_scale,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    # 网格是 (KV 头数, 工作表的长度)：工作表第 i 项是 (请求, q 块)，主机排好了先后（最重的在前）。
    # 一个程序带着共用这个 KV 头的整组 q 头（GQA）：读进来的每块 K/V 给 GROUP × BLOCK_M 行 q 用，
    # 只读一次。第 r 行是组里第 r // BLOCK_M 个头、这一块里第 r % BLOCK_M 个 token
    kvh = tl.program_id(0)
    b = tl.load(WORK + 2 * tl.program_id(1))
    mb = tl.load(WORK + 2 * tl.program_id(1) + 1)
    q_start = tl.load(CU_Q + b)
    extend_len = tl.load(CU_Q + b + 1) - q_start
    # >> ch19
    if mb * BLOCK_M >= extend_len:  # CUDA Graph 里补齐出来的工作项（第 19 章）
        return
    # << ch19
    cached = tl.load(CACHED + b)
    row = tl.load(ROWS + b).to(tl.int64)
    offs_r = tl.arange(0, GROUP_PAD * BLOCK_M)
    g = offs_r // BLOCK_M  # 组里第几个头；GROUP 不是 2 的幂时补出来的头不读不写
    offs_m = mb * BLOCK_M + offs_r % BLOCK_M
    offs_d = tl.arange(0, D)
    r_mask = (offs_m < extend_len) & (g < GROUP)
    tok = (q_start + offs_m).to(tl.int64)
    heads = kvh * GROUP + g
    q_ptrs = Q + tok[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=r_mask[:, None], other=0.0)
    pos_q = cached + offs_m  # 每个 q 的位置：能看到位置 0..pos_q 的 K/V
    m_i = tl.full([GROUP_PAD * BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD * BLOCK_M], tl.float32)
    acc = tl.zeros([GROUP_PAD * BLOCK_M, D], tl.float32)
    kv_end = tl.minimum(cached + extend_len, cached + (mb + 1) * BLOCK_M)
    # 位置小于这块 q 里最小位置的 K/V，块里每个 q 都看得见：这些块不用掩码。
    # 剩下的（对角线附近、末尾不满的）才逐个比较位置
    full_end = (cached + mb * BLOCK_M) // BLOCK_N * BLOCK_N
    for n in range(0, full_end, BLOCK_N):
        acc, l_i, m_i = _extend_step(
            acc, l_i, m_i, q, K, V, PT, row, kvh, n, kv_end, pos_q,
            stride_kt, stride_kh, stride_pt, qk_scale, D, BLOCK_N, IEEE, False,
        )  # fmt: skip
    for n in range(full_end, kv_end, BLOCK_N):
        acc, l_i, m_i = _extend_step(
            acc, l_i, m_i, q, K, V, PT, row, kvh, n, kv_end, pos_q,
            stride_kt, stride_kh, stride_pt, qk_scale, D, BLOCK_N, IEEE, True,
        )  # fmt: skip
    out = acc / l_i[:, None]
    tl.store(OUT + tok[:, None] * stride_ot + heads[:, None] * stride_oh + offs_d[None, :],
             out.to(OUT.dtype.element_ty), mask=r_mask[:, None])  # fmt: skip


@triton.jit
def _decode_partial_kernel(
    Q, K, V, PT, ROWS, LENS, O_PART, LSE_PART,
    stride_qb, stride_qh, stride_kt, stride_kh, stride_pt,
    stride_ob, stride_oh, stride_os, stride_lb, stride_lh,
    sm_scale,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr, IEEE: tl.constexpr,
    # >> ch19
    PDL: tl.constexpr = False,  # 依赖启动（第 19 章）
    # << ch19
):  # fmt: skip
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    kv_len = tl.load(LENS + b)
    row = tl.load(ROWS + b).to(tl.int64)
    # 每段的长度按这个请求自己的长度算，再取 BLOCK_N 的整数倍：网格固定（CUDA Graph
    # 要求），工作量仍然均匀
    per_split = tl.cdiv(tl.cdiv(kv_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = split * per_split
    end = tl.minimum(start + per_split, kv_len)
    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, D)
    # >> ch19
    if PDL:  # 依赖启动（第 19 章）：等前一个 kernel 的同时，把这一段第一块的 K/V 预取进 L2
        gdc_launch_dependents()
        _prefetch_first_block(K, V, PT, row, kvh, start, end, stride_kt, stride_kh, stride_pt,
                              D, BLOCK_N)  # fmt: skip
        gdc_wait()
    # << ch19
    g_mask = offs_g < GROUP
    heads = kvh * GROUP + offs_g
    q = tl.load(Q + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                mask=g_mask[:, None], other=0.0)  # fmt: skip
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, D], tl.float32)
    for n in range(start, end, BLOCK_N):
        offs_n = n + tl.arange(0, BLOCK_N)
        n_mask = offs_n < end
        slot = tl.load(PT + row * stride_pt + offs_n, mask=n_mask, other=0).to(tl.int64)
        k = tl.load(K + slot[:, None] * stride_kt + kvh * stride_kh + offs_d[None, :],
                    mask=n_mask[:, None], other=0.0)  # fmt: skip
        if IEEE:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(n_mask[None, :], s * sm_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        v = tl.load(V + slot[:, None] * stride_kt + kvh * stride_kh + offs_d[None, :],
                    mask=n_mask[:, None], other=0.0)  # fmt: skip
        l_i = l_i * alpha + tl.sum(p, 1)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    empty = end <= start
    out = tl.where(empty, 0.0, acc / tl.where(l_i == 0, 1.0, l_i)[:, None])
    lse = tl.where(empty, float("-inf"), m_i + tl.log(tl.where(l_i == 0, 1.0, l_i)))
    # >> ch19
    if NUM_SPLITS == 1:  # 不切段（第 19 章）：O_PART 就是输出，写最终结果，不用合并
        tl.store(O_PART + b * stride_ob + heads[:, None] * stride_oh + offs_d[None, :],
                 out.to(O_PART.dtype.element_ty), mask=g_mask[:, None])  # fmt: skip
        return
    # << ch19
    tl.store(O_PART + b * stride_ob + heads[:, None] * stride_oh + split * stride_os
             + offs_d[None, :], out, mask=g_mask[:, None])  # fmt: skip
    tl.store(LSE_PART + b * stride_lb + heads * stride_lh + split, lse, mask=g_mask)


@triton.jit
def _decode_reduce_kernel(
    O_PART, LSE_PART, OUT,
    stride_ob, stride_oh, stride_os, stride_lb, stride_lh, stride_fb, stride_fh,
    D: tl.constexpr, NUM_SPLITS: tl.constexpr,
    # >> ch19
    PDL: tl.constexpr = False,
    # << ch19
):  # fmt: skip
    # >> ch19
    dependent_start(PDL)
    # << ch19
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_s = tl.arange(0, NUM_SPLITS)
    offs_d = tl.arange(0, D)
    lse = tl.load(LSE_PART + b * stride_lb + h * stride_lh + offs_s)
    m = tl.max(lse, 0)
    w = tl.exp(lse - m)  # 空的 split：lse = -inf，权重 0
    part = tl.load(O_PART + b * stride_ob + h * stride_oh + offs_s[:, None] * stride_os
                   + offs_d[None, :])  # fmt: skip
    out = tl.sum(part * w[:, None], 0) / tl.sum(w, 0)
    tl.store(OUT + b * stride_fb + h * stride_fh + offs_d, out.to(OUT.dtype.element_ty))
