"""错误答案：KV 头不够分时把 k/v 的行硬切成 tp_size 份，一个头被切成了几截。"""

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
    if num_kv_heads % tp_size and tp_size % num_kv_heads:
        raise ValueError(f"num_kv_heads={num_kv_heads} 和 tp_size={tp_size} 对不上")
    q_rows = num_q_heads * head_dim // tp_size
    kv_rows = num_kv_heads * head_dim // tp_size  # 错在这里：不够分时只剩半个头
    q = ("q", rank * q_rows, (rank + 1) * q_rows)
    return [
        q,
        ("k", rank * kv_rows, (rank + 1) * kv_rows),
        ("v", rank * kv_rows, (rank + 1) * kv_rows),
    ]
