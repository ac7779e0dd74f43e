"""错误答案：允许复制时没检查 tp_size 是否为头数的整数倍（3 个头、4 个 rank 也“成功”了）。"""

from __future__ import annotations


def shard_heads(num_heads: int, tp_size: int, allow_replicate: bool = False) -> tuple[int, int]:
    if num_heads < 1 or tp_size < 1:
        raise ValueError(f"头数和 tp_size 都必须 >= 1，得到 {num_heads}, {tp_size}")
    if num_heads % tp_size == 0:
        return num_heads // tp_size, 1
    if allow_replicate and tp_size > num_heads:  # 错在这里：少了 tp_size % num_heads == 0
        return 1, tp_size // num_heads
    raise ValueError(f"{num_heads} 个头无法均分到 {tp_size} 个 rank 上")


def heads_of_rank(num_heads: int, tp_size: int, rank: int, allow_replicate: bool = False) -> range:
    if not 0 <= rank < tp_size:
        raise ValueError(f"rank={rank} 超出范围 [0, {tp_size})")
    per_rank, replicas = shard_heads(num_heads, tp_size, allow_replicate)
    start = (rank // replicas) * per_rank
    return range(start, start + per_rank)
