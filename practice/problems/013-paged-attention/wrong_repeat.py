"""错误答案：GQA 用 repeat 展开 KV 头，排成 0,1,0,1…，q 头对错了 KV 头（1 个 KV 头时碰巧对）。"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def paged_attention(q, k_cache, v_cache, slots, cached_len):
    n_new = q.shape[0]
    total = cached_len + n_new
    index = slots[:total].long()
    k = k_cache.flatten(0, 1)[index]
    v = v_cache.flatten(0, 1)[index]
    group = q.shape[1] // k.shape[1]
    k = k.repeat(1, group, 1)  # 错在这里
    v = v.repeat(1, group, 1)
    mask = torch.ones(n_new, total, dtype=torch.bool).tril(diagonal=cached_len)
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask
    )
    return out.transpose(0, 1)
