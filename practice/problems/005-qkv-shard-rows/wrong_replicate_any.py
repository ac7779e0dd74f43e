"""错误答案：复制时没检查 tp_size 是否为 KV 头数的整数倍（3 个 KV 头、4 个 rank 也"成功"了）。"""

from __future__ import annotations


def qkv_pieces(
    num_q_heads: int, num_kv_heads: int, head_dim: int, tp_size: int, rank: int
) -> list[tuple[str, int, int]]:
    for value in (num_q_heads, num_kv_heads, head_dim, tp_size, rank):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"参数必须是整数，得到 {value!r}")
    if min(num_q_heads, num_kv_heads, head_dim, tp_size) < 1 or not 0 <= rank < tp_size:
        raise ValueError(
            f"参数不合法：{num_q_heads}, {num_kv_heads}, {head_dim}, {tp_size}, {rank}"
        )
    if num_q_heads % num_kv_heads or num_q_heads % tp_size:
        raise ValueError(f"num_q_heads={num_q_heads} 分不均（{num_kv_heads}, {tp_size}）")
    if num_kv_heads >= tp_size:
        if num_kv_heads % tp_size:
            raise ValueError(f"num_kv_heads={num_kv_heads} 分不到 tp_size={tp_size} 上")
        kv_per_rank = num_kv_heads // tp_size
    else:
        kv_per_rank = 1  # 错在这里：少了 tp_size % num_kv_heads == 0 的检查
    q_per_rank = num_q_heads // tp_size
    kv_first = rank * num_kv_heads // tp_size
    q = ("q", rank * q_per_rank * head_dim, (rank + 1) * q_per_rank * head_dim)
    k0, k1 = kv_first * head_dim, (kv_first + kv_per_rank) * head_dim
    return [q, ("k", k0, k1), ("v", k0, k1)]
