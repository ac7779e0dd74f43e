"""练习 013：在分页的 KV 池上算一个请求的注意力（带前缀、GQA）。"""

from __future__ import annotations

import torch


def paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slots: torch.Tensor,
    cached_len: int,
) -> torch.Tensor:
    """q: (L, Hq, D)，位置 cached_len .. cached_len + L - 1 的新 token；
    k_cache/v_cache: (页数, page_size, Hkv, D)；slots: 这个请求每个 token 的槽位（可能更长）。
    返回 (L, Hq, D)：右下对齐的因果注意力，缩放 1 / sqrt(D)；
    第 h 个 q 头用第 h // (Hq // Hkv) 个 KV 头。
    """
    raise NotImplementedError("在这里实现 paged_attention")
