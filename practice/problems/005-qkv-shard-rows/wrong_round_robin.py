"""错误答案：KV 头不够分时"轮流"分配（rank r 拿 r % num_kv_heads 号头），Q 头找不到自己的 KV 头。"""

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
        kv_per_rank, kv_first = num_kv_heads // tp_size, rank * (num_kv_heads // tp_size)
    else:
        if tp_size % num_kv_heads:
            raise ValueError(f"tp_size={tp_size} 不是 num_kv_heads={num_kv_heads} 的整数倍")
        kv_per_rank, kv_first = 1, rank % num_kv_heads  # 错在这里：应当是 rank * num_kv // tp
    q_per_rank = num_q_heads // tp_size
    q = ("q", rank * q_per_rank * head_dim, (rank + 1) * q_per_rank * head_dim)
    k0, k1 = kv_first * head_dim, (kv_first + kv_per_rank) * head_dim
    return [q, ("k", k0, k1), ("v", k0, k1)]
