"""错误答案：直接用 is_causal=True（左上对齐），有前缀时新 token 只看得到前几个位置。"""

from __future__ import annotations

import torch.nn.functional as F


def paged_attention(q, k_cache, v_cache, slots, cached_len):
    total = cached_len + q.shape[0]
    index = slots[:total].long()
    k = k_cache.flatten(0, 1)[index]
    v = v_cache.flatten(0, 1)[index]
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1),
        k.transpose(0, 1),
        v.transpose(0, 1),
        is_causal=True,  # 错在这里
    )
    return out.transpose(0, 1)
