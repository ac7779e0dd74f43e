"""错误答案：一律转成 float32 计算，算完没有转回 q 的 dtype（float32 输入时看不出来）。"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slots: torch.Tensor,
    cached_len: int,
) -> torch.Tensor:
    n_new = q.shape[0]
    total = cached_len + n_new
    index = slots[:total].long()
    # (页数, page_size, Hkv, D) 摊平成 (槽位数, Hkv, D)：槽位就是行号
    # 错在这里：转成 float32 算，最后没有 .to(q.dtype)
    q = q.float()
    k = k_cache.flatten(0, 1)[index].float()
    v = v_cache.flatten(0, 1)[index].float()
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)  # 头 0,0,1,1,…：第 h 个 q 头对上第 h // group 个 KV 头
    v = v.repeat_interleave(group, dim=1)
    # 第 j 个新 token 看得到第 0 .. cached_len + j 列：右下对齐的下三角
    mask = torch.ones(n_new, total, dtype=torch.bool, device=q.device).tril(diagonal=cached_len)
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask
    )
    return out.transpose(0, 1)
