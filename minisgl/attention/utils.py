"""从"一组请求"到"一维排开的张量"：每个注意力后端、第 5 章的生成循环都要做的那几步换算。

一个批次里的请求长短不一。引擎不把它们补齐成矩形，而是把这一步的新 token 首尾相接排成一维
（ragged），再用前缀和 ``cu_seqlens`` 记住每个请求从哪里开始::

    请求      A(新 5 个)        B(缓存 4 + 新 3)   C(新 2 个)
    一维     [a0 a1 a2 a3 a4 | b4 b5 b6 | c0 c1]
    cu_seqlens = [0, 5, 8, 10]          positions = [0 1 2 3 4 | 4 5 6 | 0 1]

``out_loc`` 是这些 token 的 K/V 要写进去的槽位，直接从页表里读：请求 B 的第 4～6 个 token
写进页表 B 那一行的第 4～6 列。把这些换算放在一处，换一个后端（第四阶段的 Triton）
或换一个构造批次的人（第 8 章的调度器）时，语义不会走样。
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from minisgl.utils.device import to_device

if TYPE_CHECKING:
    from minisgl.core import Batch, Req

__all__ = ["cu_seqlens", "make_positions", "page_slots", "prepare_batch"]


def cu_seqlens(lengths: Sequence[int], device: torch.device | str = "cpu") -> torch.Tensor:
    """长度的前缀和，前面补一个 0：``[5, 3, 2] -> [0, 5, 8, 10]``（int32）。
    第 ``i`` 段是 ``[cu[i], cu[i+1])``，``cu[-1]`` 是总长度。"""
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = torch.tensor(list(lengths), dtype=torch.int64).cumsum(0)
    return to_device(cu, device)


def make_positions(reqs: Sequence[Req], device: torch.device | str = "cpu") -> torch.Tensor:
    """每个新 token 在自己序列里的位置：请求 r 贡献 ``cached_len .. device_len - 1``（int32）。"""
    pos = torch.cat([torch.arange(r.cached_len, r.device_len, dtype=torch.int32) for r in reqs])
    return to_device(pos, device)


def page_slots(pages: Sequence[int] | torch.Tensor, page_size: int, length: int) -> torch.Tensor:
    """一个请求拿到的若干页 → 它前 ``length`` 个 token 的槽位（int32，在 CPU 上）。

    第 ``i`` 个 token 在第 ``i // page_size`` 页的第 ``i % page_size`` 格，槽位是
    ``pages[i // page_size] * page_size + i % page_size``。页内的槽位连续，页与页之间随意——
    这正是分页的意义：一个请求的 KV 不需要一整段连续的显存。
    """
    pages = torch.as_tensor(pages, dtype=torch.int64).reshape(-1)
    if length > len(pages) * page_size:
        raise ValueError(f"{len(pages)} pages of {page_size} slots cannot hold {length} tokens")
    offsets = torch.arange(page_size, dtype=torch.int64)
    return (pages[:, None] * page_size + offsets).reshape(-1)[:length].to(torch.int32)


def prepare_batch(batch: Batch, page_table: torch.Tensor) -> Batch:
    """填好 ``batch.input_ids``、``positions``、``out_loc``（都放在页表所在的设备上），返回 batch。

    页表里每个请求的 ``0 .. device_len - 1`` 列必须已经填好槽位（由调度器的缓存管理分配；
    不经过调度器的演示和测试手工分配）。这一步只写 ``cached_len .. device_len - 1`` 这几个槽位，
    前面的槽位里是以前算好的 K/V，注意力会读它们，但不会重写。
    """
    device = page_table.device
    reqs = batch.reqs
    for r in reqs:
        if not 0 <= r.table_idx < page_table.shape[0] or r.device_len > page_table.shape[1]:
            raise ValueError(f"{r} does not fit in a page table of shape {tuple(page_table.shape)}")
    ids = torch.cat([r.input_ids[r.cached_len : r.device_len] for r in reqs]).to(torch.int32)
    batch.input_ids = to_device(ids, device)
    batch.positions = make_positions(reqs, device)
    # 页表已经在设备上：切片再拼接都在设备上完成，不需要把页表拷回主机
    batch.out_loc = torch.cat([page_table[r.table_idx, r.cached_len : r.device_len] for r in reqs])
    return batch
