"""原生后端：只用 PyTorch（``scaled_dot_product_attention``）在分页的 KV 池上算注意力。

官方只有 FlashInfer、FlashAttention、TRT-LLM 三个 CUDA 后端。这个后端在 CPU、MPS、CUDA 上都能跑，
也是后面所有快速后端的参照答案。它按请求逐个计算，思路和分页 kernel 一样::

    1. 写：这一步新 token 的 K/V 写进 KV 池的 out_loc 槽位；
    2. 读：按页表找到这个请求的全部页，取出前 device_len 个 token 的 K/V（前缀 + 新 token）；
    3. 算：新 token 的 q 对这些 K/V 做带掩码的注意力。

第 3 步的掩码是"右下对齐"的因果掩码：第 j 个新 token 的位置是 ``cached_len + j``，
它能看到位置 ``0 .. cached_len + j`` 的 K/V。只有一个新 token（decode）时它能看到全部，
不需要掩码。
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from minisgl.core import Batch
from minisgl.kvcache import BaseKVCachePool
from minisgl.utils.device import to_device

from .base import BaseAttnBackend, BaseAttnMetadata
from .utils import cu_seqlens

__all__ = ["NativeAttnBackend", "NativeAttnMetadata", "SeqPlan", "attention", "extend_causal_mask"]
# >> ch07
__all__ += ["NativeGraphMetadata"]
# << ch07


def extend_causal_mask(
    cached_len: int, extend_len: int, device: torch.device | str = "cpu"
) -> torch.Tensor | None:
    """``(extend_len, cached_len + extend_len)`` 的布尔掩码，True 表示"能看到"。

    第 j 行（位置 ``cached_len + j`` 的新 token）能看到第 ``0 .. cached_len + j`` 列。
    ``extend_len == 1`` 时返回 None：唯一的新 token 在最后，能看到全部。

    注意 ``F.scaled_dot_product_attention(..., is_causal=True)`` 的掩码是"左上对齐"的
    （第 j 行看第 0..j 列），只在没有前缀（``cached_len == 0``）时才是对的。
    """
    if extend_len == 1:
        return None
    total = cached_len + extend_len
    return torch.ones(extend_len, total, dtype=torch.bool, device=device).tril(diagonal=cached_len)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """一个序列的注意力。``q``: ``(L, Hq, D)``；``k``、``v``: ``(S, Hkv, D)``；
    ``mask``: ``(L, S)`` 布尔或 None。返回 ``(L, Hq, D)``。

    GQA：``Hq`` 个 q 头分成 ``Hkv`` 组，第 h 个 q 头用第 ``h // (Hq // Hkv)`` 个 KV 头。
    ``repeat_interleave`` 把每个 KV 头连续复制 ``Hq // Hkv`` 份，正好排成这个对应关系
    （``repeat`` 会排成 0,1,0,1……，是错的）。
    """
    if q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"{q.shape[1]} q heads cannot share {k.shape[1]} kv heads evenly")
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    # SDPA 要的是 (头数, 序列长度, head_dim)；缩放默认就是 1 / sqrt(head_dim)
    o = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask
    )
    return o.transpose(0, 1)


@dataclass
class SeqPlan:
    """一个请求在这一步的计算计划。"""

    q_start: int  # 它的新 token 在一维排列里的 [q_start, q_end)
    q_end: int
    cached_len: int
    kv_len: int  # = device_len：要读的 K/V 个数（前缀 + 新 token）
    pages: torch.Tensor  # 它的 K/V 所在的页号，按顺序；最后一页可能没有用满
    mask: torch.Tensor | None  # extend_causal_mask 的结果


@dataclass
class NativeAttnMetadata(BaseAttnMetadata):
    cu_seqlens_q: torch.Tensor  # (bs + 1,)，在计算设备上
    seqs: list[SeqPlan]

    def get_last_indices(self, bs: int) -> torch.Tensor:
        # 第 i 个请求的新 token 是 [cu[i], cu[i+1])，最后一个是 cu[i+1] - 1
        return self.cu_seqlens_q[1 : bs + 1] - 1


class NativeAttnBackend(BaseAttnBackend):
    """``kv_cache`` 存 K/V，``page_table`` 告诉我们每个请求的第 i 个 token 在哪个槽位。"""

    def __init__(self, kv_cache: BaseKVCachePool, page_table: torch.Tensor) -> None:
        if page_table.device != kv_cache.device:
            raise ValueError(f"page table on {page_table.device} but KV cache on {kv_cache.device}")
        self.kv_cache = kv_cache
        self.page_table = page_table

    def prepare_metadata(self, batch: Batch) -> None:
        page_size = self.kv_cache.page_size
        device = self.page_table.device
        cu = cu_seqlens([r.extend_len for r in batch.reqs])  # 先在主机上算，下标要用 Python 整数
        seqs = []
        for i, r in enumerate(batch.reqs):
            # 每页取第一个槽位（第 0, page_size, 2*page_size... 列），除以页大小就是页号。
            # 这要求页表的每一页都从页首开始、页内连续——分配器（第 8 章）保证这一点
            first_slots = self.page_table[r.table_idx, : r.device_len : page_size]
            seqs.append(
                SeqPlan(
                    q_start=int(cu[i]),
                    q_end=int(cu[i + 1]),
                    cached_len=r.cached_len,
                    kv_len=r.device_len,
                    pages=first_slots.long() // page_size,
                    mask=extend_causal_mask(r.cached_len, r.extend_len, device),
                )
            )
        batch.attn_metadata = NativeAttnMetadata(cu_seqlens_q=to_device(cu, device), seqs=seqs)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int, batch: Batch
    ) -> torch.Tensor:
        meta = batch.attn_metadata
        # >> ch07
        if isinstance(meta, NativeGraphMetadata):
            return self._forward_padded_decode(q, k, v, layer_id, batch.out_loc, meta)
        # << ch07
        if not isinstance(meta, NativeAttnMetadata):
            raise TypeError(f"expected NativeAttnMetadata, got {type(meta).__name__}")
        # 1. 写：先写后读，新 token 才能看到自己
        self.kv_cache.store_kv(k, v, batch.out_loc, layer_id)
        k_pages = self.kv_cache.k_cache(layer_id)  # (页数, page_size, kv 头数, head_dim)
        v_pages = self.kv_cache.v_cache(layer_id)
        out = torch.empty_like(q)
        for s in meta.seqs:
            # 2. 读：取出这个请求的整页，摊平成 token，再截掉最后一页没用到的格子
            k_seq = k_pages[s.pages].flatten(0, 1)[: s.kv_len]  # (kv_len, kv 头数, head_dim)
            v_seq = v_pages[s.pages].flatten(0, 1)[: s.kv_len]
            # 3. 算
            out[s.q_start : s.q_end] = attention(q[s.q_start : s.q_end], k_seq, v_seq, s.mask)
        return out

    # >> ch07
    def make_graph_metadata(self, max_bs: int) -> NativeGraphMetadata:
        """CUDA Graph 用的元数据：形状按最大批次和页表的列数固定，重放前只改内容。"""
        columns = self.page_table.shape[1]
        device = self.page_table.device
        return NativeGraphMetadata(
            slots=torch.zeros(max_bs, columns, dtype=torch.int64, device=device),
            kv_lens=torch.ones(max_bs, dtype=torch.int64, device=device),
        )

    def fill_graph_metadata(
        self, meta: NativeGraphMetadata, batch: Batch, padded_bs: int, dummy_slot: int
    ) -> None:
        """把一个 decode 批次写进固定形状的元数据；第 ``bs .. padded_bs-1`` 行是补齐的假请求，
        它们只看哑页里的 1 个槽位。全部是原地拷贝：图里记住的是这几块内存的地址。"""
        bs = batch.size
        rows = torch.tensor([r.table_idx for r in batch.reqs], dtype=torch.int64)
        lens = torch.tensor([r.device_len for r in batch.reqs], dtype=torch.int64)
        meta.slots[:bs].copy_(self.page_table[to_device(rows, self.page_table.device)])
        meta.slots[bs:padded_bs].fill_(dummy_slot)
        meta.kv_lens[:bs].copy_(lens, non_blocking=True)
        meta.kv_lens[bs:padded_bs].fill_(1)

    def reset_graph_metadata(self, meta: NativeGraphMetadata, bs: int, dummy_slot: int) -> None:
        """捕获之前：前 ``bs`` 行都是只看哑页 1 个槽位的假请求。"""
        meta.slots[:bs].fill_(dummy_slot)
        meta.kv_lens[:bs].fill_(1)

    def _forward_padded_decode(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer_id: int,
        out_loc: torch.Tensor,
        meta: NativeGraphMetadata,
    ) -> torch.Tensor:
        """decode 的"整批一次算"版本：没有按请求的 Python 循环，张量形状只取决于批大小，
        所以可以被 CUDA Graph 捕获。代价是每个请求都读满页表的一整行（用掩码去掉多余的）。"""
        self.kv_cache.store_kv(k, v, out_loc, layer_id)
        bs = q.shape[0]
        slots = meta.slots[:bs]  # (bs, L)
        k_flat = self.kv_cache.k_cache(layer_id).flatten(0, 1)  # (槽位数, kv 头数, head_dim)
        v_flat = self.kv_cache.v_cache(layer_id).flatten(0, 1)
        k_seq, v_seq = k_flat[slots], v_flat[slots]  # (bs, L, kv 头数, head_dim)
        group = q.shape[1] // k.shape[1]
        if group > 1:
            k_seq = k_seq.repeat_interleave(group, dim=2)
            v_seq = v_seq.repeat_interleave(group, dim=2)
        columns = torch.arange(slots.shape[1], device=slots.device)
        mask = columns[None, :] < meta.kv_lens[:bs, None]  # (bs, L)：只看前 kv_len 个
        o = F.scaled_dot_product_attention(
            q[:, :, None, :],  # (bs, Hq, 1, D)
            k_seq.transpose(1, 2),  # (bs, Hq, L, D)
            v_seq.transpose(1, 2),
            attn_mask=mask[:, None, None, :],
        )
        return o[:, :, 0, :]


@dataclass
class NativeGraphMetadata(BaseAttnMetadata):
    """decode 专用、形状固定的元数据（CUDA Graph 捕获时用；CPU 上也能即时运行，测试用它）。"""

    slots: torch.Tensor  # (max_bs, 页表列数) int64：每个请求的第 i 个 token 在哪个槽位
    kv_lens: torch.Tensor  # (max_bs,) int64：每个请求这一步之后有几个 token 的 K/V

    def get_last_indices(self, bs: int) -> torch.Tensor:
        # decode 每个请求恰好 1 个新 token，第 i 个就在第 i 行
        return torch.arange(bs, device=self.kv_lens.device)


# << ch07
