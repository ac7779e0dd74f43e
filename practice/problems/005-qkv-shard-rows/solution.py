"""参考答案：第 rank 个 rank 的 qkv_proj 由 q/k/v 投影的哪几段行拼成。"""

from __future__ import annotations


def qkv_pieces(
    num_q_heads: int, num_kv_heads: int, head_dim: int, tp_size: int, rank: int
) -> list[tuple[str, int, int]]:
    args = {
        "num_q_heads": num_q_heads,
        "num_kv_heads": num_kv_heads,
        "head_dim": head_dim,
        "tp_size": tp_size,
        "rank": rank,
    }
    for name, value in args.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} 必须是整数，得到 {value!r}")
    for name in ("num_q_heads", "num_kv_heads", "head_dim", "tp_size"):
        if args[name] < 1:
            raise ValueError(f"{name} 必须 >= 1，得到 {args[name]}")
    if not 0 <= rank < tp_size:
        raise ValueError(f"rank={rank} 超出范围 [0, {tp_size})")
    if num_q_heads % num_kv_heads != 0:
        raise ValueError(f"num_q_heads={num_q_heads} 不是 num_kv_heads={num_kv_heads} 的整数倍")
    if num_q_heads % tp_size != 0:
        raise ValueError(f"num_q_heads={num_q_heads} 不能均分到 tp_size={tp_size} 个 rank 上")
    if num_kv_heads >= tp_size:
        if num_kv_heads % tp_size != 0:
            raise ValueError(f"num_kv_heads={num_kv_heads} 不能均分到 tp_size={tp_size} 个 rank 上")
        kv_per_rank = num_kv_heads // tp_size
    else:
        if tp_size % num_kv_heads != 0:
            raise ValueError(
                f"tp_size={tp_size} 不是 num_kv_heads={num_kv_heads} 的整数倍，无法均匀复制"
            )
        kv_per_rank = 1
    q_per_rank = num_q_heads // tp_size
    q_first = rank * q_per_rank
    # 够分时它就是 rank * kv_per_rank；不够分时相邻的 rank 得到同一个头
    kv_first = rank * num_kv_heads // tp_size
    q = ("q", q_first * head_dim, (q_first + q_per_rank) * head_dim)
    k0, k1 = kv_first * head_dim, (kv_first + kv_per_rank) * head_dim
    return [q, ("k", k0, k1), ("v", k0, k1)]
