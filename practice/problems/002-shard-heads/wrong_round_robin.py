"""错误答案：复制时“轮流”分配（rank r 拿 r % num_heads 号头），GQA 下 Q 头找不到自己的 KV 头。"""

from __future__ import annotations


def shard_heads(num_heads: int, tp_size: int, allow_replicate: bool = False) -> tuple[int, int]:
    if num_heads < 1 or tp_size < 1:
        raise ValueError(f"头数和 tp_size 都必须 >= 1，得到 {num_heads}, {tp_size}")
    if num_heads % tp_size == 0:
        return num_heads // tp_size, 1
    if allow_replicate and tp_size > num_heads and tp_size % num_heads == 0:
        return 1, tp_size // num_heads
    raise ValueError(f"{num_heads} 个头无法均分到 {tp_size} 个 rank 上")


def heads_of_rank(num_heads: int, tp_size: int, rank: int, allow_replicate: bool = False) -> range:
    if not 0 <= rank < tp_size:
        raise ValueError(f"rank={rank} 超出范围 [0, {tp_size})")
    per_rank, replicas = shard_heads(num_heads, tp_size, allow_replicate)
    if replicas > 1:
        head = rank % num_heads  # 错在这里：应当是 rank // replicas
        return range(head, head + 1)
    return range(rank * per_rank, (rank + 1) * per_rank)
