"""Triton 后端：在分页的 KV 池上算注意力的两个 kernel，外加把它们接进引擎的 ``TritonAttnBackend``。

第 4 章的原生后端按请求逐个循环，每个请求先把自己的 K/V 从池子里"收集"成一块连续的张量，再调用
``scaled_dot_product_attention``。收集本身就要把 K/V 读一遍、写一遍，还要为每个请求启动
好几个小 kernel。
这里的 kernel 直接**按页表去池子里读**：第 ``pos`` 个 token 的 K/V 在槽位 ``page_table[行, pos]``，
读进寄存器就算，不落地。页表存的是槽位而不是页号，所以 kernel 根本不需要知道页大小。

- ``extend_attention``（prefill / extend，一批里长短不一、可以带缓存的前缀）：一个请求的新 token
  按 BLOCK_M 分块，每个程序拿一个请求的一块 q、在一个 KV 头的整组 q 头上（GQA：K/V 只读一次），
  沿 K/V 方向按 BLOCK_N 分块扫过去，用 online softmax（随时维护行最大值 m、分母 l、加权和 acc）
  一边读一边累加；因果掩码按**位置**算：
  位置 ``cached + j`` 的 q 只看位置 ``<= cached + j`` 的 K/V。新 token 的 K/V 已经先写进池子，
  所以前缀和新 token 一视同仁，都从池子里读。
- ``decode_attention``（每个请求 1 个新 token）：q 只有一行，一个请求一个程序的话，bs=1 时整块 GPU
  只有几个程序在干活。所以把每个请求的 K/V 再切成 ``NUM_SPLITS`` 段（split-K），每段各算出一个局部的
  (输出, log-sum-exp)，第二个小 kernel 按 lse 加权合并。一个 KV 头带着它的整组 q 头（GQA）一起算，
  K/V 只读一次。段数固定、每段多长按请求自己的长度在 kernel 里算，网格形状只取决于批大小——
  CUDA Graph 能捕获它。

没有装 triton 时这个模块照样能导入（``triton`` 是可选依赖），只是 ``TRITON_AVAILABLE`` 为 False，
后端不会被选中。不在 CUDA 上运行时（没有 GPU，或者设了 ``MINISGL_DEVICE=cpu``），同样的 kernel
由 Triton 的解释器逐条执行（张量在 CPU 上）：慢，但算的是同一段代码，CI 里没有 GPU 也能测
kernel 本身。
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from minisgl.utils.device import ints_to_device, pin_memory, use_triton_interpreter_unless_cuda

from .base import BaseAttnBackend, BaseAttnMetadata

if TYPE_CHECKING:
    from minisgl.core import Batch
    from minisgl.kvcache import BaseKVCachePool

    # >> ch19
    from .base import QKNormRope
    # << ch19

__all__ = [
    "TRITON_AVAILABLE",
    "TritonAttnBackend",
    "TritonAttnMetadata",
    "decode_attention",
    "extend_attention",
]

import itertools
from collections.abc import Sequence

if TYPE_CHECKING:
    from minisgl.core import Req

use_triton_interpreter_unless_cuda()  # 必须在导入 triton 之前
try:
    import triton

    from .triton_kernels import _decode_partial_kernel, _decode_reduce_kernel, _extend_kernel

    TRITON_AVAILABLE = True
    # >> ch19
    from minisgl.kernel.triton_ops import dependent_launch  # 依赖启动（第 19 章）
    # << ch19
except ImportError:  # 可选依赖：没有它就只有原生后端
    TRITON_AVAILABLE = False

# q 块、K/V 块的大小；tl.dot 要求每一维至少 16。kernel 本身在 triton_kernels.py
BLOCK_M, BLOCK_N = 32, 32
NUM_SPLITS = 8  # decode 时每个请求的 K/V 切成几段


# >> ch19
# GPU 上 16 位的 extend：一块 32 个 token，带着整组 q 头（Qwen3-0.6B 一组 2 个，一块 64 行），
# 三级流水，读下一块 K/V 的同时算这一块（H100 上试过九组，四种批次里三种是它最快；见第 19 章
# 第二十九处）
EXTEND_TILES_CUDA = {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 3}


def decode_tiles_cuda(bs: int, num_kv_heads: int) -> tuple[int, dict[str, int]]:
    """GPU 上 16 位的 decode：切几段、块多大、几个 warp、几级流水（H200 上试过，见 19 章）。

    program 数是 ``bs × KV 头数 × 段数``。一批里的请求长短不一：不切段时一个 program 读完一个
    请求在一个 KV 头上的全部 K/V，最长的那个请求决定这一层多久。所以只有批很大（不切就有 1536 个
    以上的 program，每个 SM 排着十来个，短的算完还有别的可接）时才不切；小一些时切 2 段，最长的
    那一段短了一半；不超过 256 个 program（8 个 KV 头时 32 个请求）时切 8 段。这三档是在离线负载
    真实的长度上挑的，都是 64 个 token 一块、4 个 warp。program 不超过 64 个时每个请求切 16 段：
    只有几个请求时 8 个 warp、两级流水（放进整步 decode 里挑的：单独连着跑最快的 4 个 warp、
    四级流水，夹在真实的一层里整步反而慢），正好 64 个时 32 个 token 一块、2 个 warp、不流水
    （请求只有两百来个 token 时，64 个一块的 16 段里只有 4 段有活）。段数要是 2 的幂：合并的
    kernel 用 ``tl.arange`` 取各段。"""
    programs = bs * num_kv_heads
    if programs > 1536:
        return 1, {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    if programs > 256:
        return 2, {"BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
    if programs > 64:
        return 8, {"BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
    if programs < 64:
        return 16, {"BLOCK_N": 64, "num_warps": 8, "num_stages": 2}
    return 16, {"BLOCK_N": 32, "num_warps": 2, "num_stages": 1}


# CUDA Graph 里补齐出来的工作项：块号大得超出任何请求，程序一开始就返回
IDLE_BLOCK = 1 << 24


# << ch19
def extend_tiles(device: torch.device, dtype: torch.dtype) -> dict[str, int]:
    """extend kernel 在这个设备、这个精度上用的块（工作表按其中的 ``BLOCK_M`` 切块）。"""
    # >> ch19
    if device.type == "cuda" and dtype.itemsize == 2:
        return EXTEND_TILES_CUDA
    # << ch19
    return {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N}


def extend_work(extend: Sequence[int], cached: Sequence[int], block_m: int) -> list[int]:
    """extend kernel 的工作表：这一批每个请求的每一块 q（``block_m`` 行一块），摊平成
    ``[请求, q 块, 请求, q 块, ...]``。

    按每块要扫的 K/V 长度（前缀 + 到这一块末尾的新 token）从长到短排：网格里先发出的程序先上
    SM，因果掩码下越靠后的 q 块、前缀越长的请求，要扫的 K/V 越多。最重的先算，收尾时剩下的都是
    轻的，SM 不用空等最后几个长程序。"""
    items = [
        (c + min(e, (mb + 1) * block_m), b, mb)
        for b, (e, c) in enumerate(zip(extend, cached))
        for mb in range(triton.cdiv(e, block_m))
    ]
    items.sort(reverse=True)
    return [x for _, b, mb in items for x in (b, mb)]


def _ieee(dtype: torch.dtype) -> bool:
    # float32 时要求 tl.dot 按 IEEE 算：默认的 TF32 只有 10 位尾数，和原生后端逐 token 比较会不一样
    return dtype == torch.float32


def extend_attention(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    page_table: torch.Tensor,
    rows: torch.Tensor,
    cu_q: torch.Tensor,
    cached: torch.Tensor,
    work: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``q``: ``(T, Hq, D)``，T 个新 token 按请求首尾相接；``k_pool``、``v_pool``:
    ``(槽位数, Hkv, D)``。第 i 个请求的新 token 是 ``q[cu_q[i]:cu_q[i+1]]``，位置从 ``cached[i]``
    开始，页表行号 ``rows[i]``。``work``：``extend_work`` 排好的工作表，``(块数, 2)`` 的 int32，
    按 ``extend_tiles`` 的 ``BLOCK_M`` 切的块。"""
    _, num_q_heads, head_dim = q.shape
    num_kv_heads = k_pool.shape[1]
    group = num_q_heads // num_kv_heads
    out = torch.empty_like(q) if out is None else out  # 测试传进一块填满 nan 的：没写到的位置露馅
    tiles = extend_tiles(q.device, q.dtype)
    grid = (num_kv_heads, work.shape[0])  # 每个程序：一个 KV 头（带着它的整组 q 头）× 工作表的一项
    _extend_kernel[grid](
        q, k_pool, v_pool, out, page_table, rows, cu_q, cached, work,
        q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1),
        out.stride(0), out.stride(1), page_table.stride(0),
        math.log2(math.e) / math.sqrt(head_dim),  # kernel 里用 exp2：缩放里先乘上 log2(e)
        GROUP=group, GROUP_PAD=triton.next_power_of_2(group), D=head_dim, IEEE=_ieee(q.dtype),
        **tiles,
    )  # fmt: skip
    return out


def decode_attention(
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    page_table: torch.Tensor,
    rows: torch.Tensor,
    kv_lens: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``q``: ``(bs, Hq, D)``，每个请求 1 个新 token；它看自己的前 ``kv_lens[i]`` 个 K/V。"""
    bs, num_q_heads, head_dim = q.shape
    num_kv_heads = k_pool.shape[1]
    group = num_q_heads // num_kv_heads
    # 局部结果用 float32 存：合并时要的是精度，这两块缓冲区也很小（bs × Hq × 段数）
    f32 = dict(dtype=torch.float32, device=q.device)
    # launch：两个 kernel 启动时另加的参数，这里没有；第 19 章在 Hopper 上用它打开依赖启动
    splits, tiles, launch = NUM_SPLITS, {"BLOCK_N": BLOCK_N}, {}
    # >> ch19
    if q.is_cuda and q.element_size() == 2:
        splits, tiles = decode_tiles_cuda(bs, num_kv_heads)
    launch = dependent_launch(q)
    # << ch19
    out = torch.empty_like(q) if out is None else out
    # ~~ ch18 < ch19
    # ~ partial = torch.empty(bs, num_q_heads, splits, head_dim, **f32)
    # ~~
    # >> ch19
    # 不切段时没有要合并的：partial kernel 直接写 out（它的 (bs, Hq, 1, D) 视图），少启动一个 kernel
    partial = (
        out.unsqueeze(2) if splits == 1 else torch.empty(bs, num_q_heads, splits, head_dim, **f32)
    )
    # << ch19
    lse = torch.empty(bs, num_q_heads, splits, **f32)
    _decode_partial_kernel[(bs, num_kv_heads, splits)](
        q, k_pool, v_pool, page_table, rows, kv_lens, partial, lse,
        q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1), page_table.stride(0),
        partial.stride(0), partial.stride(1), partial.stride(2), lse.stride(0), lse.stride(1),
        1.0 / math.sqrt(head_dim),
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), D=head_dim,
        NUM_SPLITS=splits, IEEE=_ieee(q.dtype), **tiles, **launch,
    )  # fmt: skip
    # >> ch19
    if splits == 1:
        return out
    # << ch19
    _decode_reduce_kernel[(bs, num_q_heads)](
        partial, lse, out,
        partial.stride(0), partial.stride(1), partial.stride(2), lse.stride(0), lse.stride(1),
        out.stride(0), out.stride(1),
        D=head_dim, NUM_SPLITS=splits, **launch,
    )  # fmt: skip
    return out


# ---------------------------------------------------------------- 接进引擎


@dataclass
class TritonAttnMetadata(BaseAttnMetadata):
    """一个批次的元数据：几个 ``(bs,)`` 的小整数张量，在设备上。不按请求保存任何 Python 对象，
    kernel 要的东西全在这里；CUDA Graph 用的是同一个类，字段指向固定地址的缓冲区。"""

    rows: torch.Tensor  # (bs,) int32：页表的行
    cu_q: torch.Tensor  # (bs + 1,) int32：新 token 的前缀和
    cached: torch.Tensor  # (bs,) int32：已经在池子里的 token 数（新 token 从这个位置开始）
    kv_lens: torch.Tensor  # (bs,) int32：这一步之后的 token 数 = cached + 新 token 数
    work: torch.Tensor  # (块数, 2) int32：extend kernel 的工作表（``extend_work``）；decode 时为空
    is_decode: bool  # 每个请求恰好 1 个新 token：走 split-K 的 decode kernel

    def get_last_indices(self, bs: int) -> torch.Tensor:
        return (self.cu_q[1 : bs + 1] - 1).long()


class TritonAttnBackend(BaseAttnBackend):
    """``--attention-backend triton``；CUDA 上装了 triton 时 ``auto`` 选它。"""

    def __init__(self, kv_cache: BaseKVCachePool, page_table: torch.Tensor) -> None:
        if not TRITON_AVAILABLE:
            raise RuntimeError("the triton attention backend needs the 'triton' package")
        self.kv_cache = kv_cache
        self.page_table = page_table

    def prepare_metadata(self, batch: Batch) -> None:
        is_decode = all(r.extend_len == 1 for r in batch.reqs)
        # 五个小张量先在主机上拼成一块，一次拷到设备上，再切开。decode 走另一个 kernel，不要工作表
        parts = self.host_metadata(batch.reqs, with_work=not is_decode)
        rows, cu_q, cached, kv_lens, work = ints_to_device(parts, self.page_table.device)
        batch.attn_metadata = TritonAttnMetadata(
            rows, cu_q, cached, kv_lens, work.view(-1, 2), is_decode
        )

    def host_metadata(
        self,
        reqs: Sequence[Req],
        *,
        with_work: bool = True,
        # >> ch19
        num_reqs: int | None = None,
        num_blocks: int | None = None,
        # << ch19
    ) -> tuple[list[int], ...]:
        """元数据的五段，还在主机上：行、新 token 的前缀和、前缀长度、总长度、摊平的工作表。"""
        extend = [r.extend_len for r in reqs]
        rows = [r.table_idx for r in reqs]
        cu = list(itertools.accumulate(extend, initial=0))
        cached = [r.cached_len for r in reqs]
        kv_lens = [r.device_len for r in reqs]
        block_m = extend_tiles(self.page_table.device, self.kv_cache.dtype)["BLOCK_M"]
        work = extend_work(extend, cached, block_m) if with_work else []
        # >> ch19
        # 录下的 prefill 图要固定的形状（第 19 章）：补齐到 num_reqs 个请求、num_blocks 块。补出来的
        # 请求没有新 token（前缀和不再增长），补出来的工作项是 IDLE_BLOCK
        if num_reqs is not None:
            if len(reqs) > num_reqs:
                raise ValueError(f"{len(reqs)} requests do not fit in {num_reqs}")
            pad = num_reqs - len(reqs)
            rows, cu = rows + [0] * pad, cu + [cu[-1]] * pad
            cached, kv_lens = cached + [0] * pad, kv_lens + [1] * pad
        if num_blocks is not None:
            if len(work) > 2 * num_blocks:
                raise ValueError(f"{len(work) // 2} q blocks do not fit in {num_blocks}")
            work = work + [0, IDLE_BLOCK] * (num_blocks - len(work) // 2)
        # << ch19
        return rows, cu, cached, kv_lens, work

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: Batch
    ) -> torch.Tensor:
        self.kv_cache.store_kv(k, v, batch.out_loc, layer_id)  # 先写后读：新 token 看得到自己
        return self._attend(q, layer_id, batch)

    # >> ch19
    def forward_norm_rope(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer_id: int,
        batch: Batch,
        norm_rope: QKNormRope,
    ) -> torch.Tensor:
        """归一化、RoPE 和写 KV 在同一个 kernel 里（``QKNormRope.apply_and_store``）。"""
        norm_rope.apply_and_store(q, k, v, *self._pools(layer_id), batch.out_loc)
        return self._attend(q, layer_id, batch)

    # << ch19
    def _pools(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """第 ``layer_id`` 层的 K 池、V 池：``(槽位数, Hkv, D)`` 的视图，不拷贝。"""
        return (
            self.kv_cache.k_cache(layer_id).flatten(0, 1),
            self.kv_cache.v_cache(layer_id).flatten(0, 1),
        )

    def _attend(self, q: torch.Tensor, layer_id: int, batch: Batch) -> torch.Tensor:
        """新 token 的 K/V 已经在池子里：按页表读出每个请求的全部 K/V，算注意力。"""
        meta = batch.attn_metadata
        if not isinstance(meta, TritonAttnMetadata):
            raise TypeError(f"expected TritonAttnMetadata, got {type(meta).__name__}")
        k_pool, v_pool = self._pools(layer_id)
        if meta.is_decode:
            return decode_attention(q, k_pool, v_pool, self.page_table, meta.rows, meta.kv_lens)
        return extend_attention(
            q, k_pool, v_pool, self.page_table, meta.rows, meta.cu_q, meta.cached, meta.work
        )

    # ------------------------------------------------------------ CUDA Graph（第 7 章的三个钩子）

    def make_graph_metadata(self, max_bs: int) -> TritonAttnMetadata:
        device = self.page_table.device
        zeros = torch.zeros(max_bs, dtype=torch.int32, device=device)
        return TritonAttnMetadata(
            rows=zeros.clone(),
            cu_q=torch.arange(max_bs + 1, dtype=torch.int32, device=device),
            cached=zeros.clone(),
            kv_lens=torch.ones(max_bs, dtype=torch.int32, device=device),
            work=torch.zeros(0, 2, dtype=torch.int32, device=device),
            is_decode=True,
        )

    def fill_graph_metadata(
        self, meta: TritonAttnMetadata, batch: Batch, padded_bs: int, dummy_slot: int
    ) -> None:
        """只写两个 ``(bs,)`` 的小张量（原生后端要拷整行页表）。行号从锁页内存直接拷进图的缓冲区；
        长度不用再拷：decode 的位置是 ``device_len - 1``，已经在设备上，加 1 就是。主机上每个
        小算子、每次小拷贝都要十几到几十微秒，batch 1 时每一步也要走这里。补齐的假请求读第 0 行的
        1 个槽位：读什么都无所谓，它的输出会被丢掉，只要地址合法。"""
        bs = batch.size
        rows = torch.tensor([r.table_idx for r in batch.reqs], dtype=torch.int32)
        meta.rows[:bs].copy_(pin_memory(rows, self.page_table.device), non_blocking=True)
        torch.add(batch.positions, 1, out=meta.kv_lens[:bs])
        if padded_bs > bs:
            meta.rows[bs:padded_bs].fill_(0)
            meta.kv_lens[bs:padded_bs].fill_(1)

    def reset_graph_metadata(self, meta: TritonAttnMetadata, bs: int, dummy_slot: int) -> None:
        """捕获之前：前 ``bs`` 行都是只看 1 个槽位的假请求。"""
        meta.rows[:bs].fill_(0)
        meta.kv_lens[:bs].fill_(1)

    # >> ch19
    # ------------------------------------------------------------ prefill 的 CUDA Graph（第 19 章）

    def make_prefill_graph_metadata(self, max_reqs: int, num_tokens: int) -> TritonAttnMetadata:
        """一档 prefill 图的静态元数据：``max_reqs`` 个请求，工作表留够 ``num_tokens`` 个 token
        最多切得出的块数（每个请求最后一块可能不满，所以再加上请求数）。捕获之前只有第一个请求
        有 1 个新 token（读第 0 行的 1 个槽位），其余请求没有新 token，其余工作项都是空的。"""
        block_m = extend_tiles(self.page_table.device, self.kv_cache.dtype)["BLOCK_M"]
        num_blocks = triton.cdiv(num_tokens, block_m) + max_reqs
        parts = (
            [0] * max_reqs, [0] + [1] * max_reqs, [0] * max_reqs, [1] * max_reqs,
            [0, 0] + [0, IDLE_BLOCK] * (num_blocks - 1),
        )  # fmt: skip
        rows, cu_q, cached, kv_lens, work = ints_to_device(parts, self.page_table.device)
        return TritonAttnMetadata(rows, cu_q, cached, kv_lens, work.view(num_blocks, 2), False)

    def fill_prefill_graph_metadata(self, meta: TritonAttnMetadata, batch: Batch) -> None:
        """把真实批次的元数据补齐成图里的形状，一次拷到设备上，再分别拷进图的缓冲区。"""
        parts = self.host_metadata(
            batch.reqs, num_reqs=meta.rows.shape[0], num_blocks=meta.work.shape[0]
        )
        fresh = ints_to_device(parts, self.page_table.device)
        for dst, src in zip((meta.rows, meta.cu_q, meta.cached, meta.kv_lens, meta.work), fresh):
            dst.view(-1).copy_(src)

    # << ch19
