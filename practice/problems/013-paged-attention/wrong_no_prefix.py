"""错误答案：只读了新 token 自己的 K/V，忘了池子里缓存的前缀。"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def paged_attention(q, k_cache, v_cache, slots, cached_len):
    n_new = q.shape[0]
    index = slots[cached_len : cached_len + n_new].long()  # 错在这里：应当从 0 开始
    k = k_cache.flatten(0, 1)[index]
    v = v_cache.flatten(0, 1)[index]
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    mask = torch.ones(n_new, n_new, dtype=torch.bool).tril()
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask
    )
    return out.transpose(0, 1)
