"""错误答案：用 / 算每个 rank 的头数，得到 (8.0, 1) 这样的 float。"""

from __future__ import annotations


def shard_heads(num_heads: int, tp_size: int, allow_replicate: bool = False) -> tuple[int, int]:
    """返回 (每个 rank 的头数, 每个头的副本数)；分不均匀又不能复制时抛 ValueError。"""
    if num_heads < 1 or tp_size < 1:
        raise ValueError(
            f"头数和 tp_size 都必须 >= 1，得到 num_heads={num_heads}, tp_size={tp_size}"
        )
    if num_heads % tp_size == 0:
        return num_heads / tp_size, 1  # 错在这里：/ 的结果是 float
    if allow_replicate and tp_size > num_heads and tp_size % num_heads == 0:
        # 头比 rank 少：每个 rank 放一个头，每个头复制到 tp_size // num_heads 个 rank 上
        return 1, tp_size // num_heads
    hint = "（tp_size 是头数的整数倍时可以 allow_replicate=True）" if not allow_replicate else ""
    raise ValueError(f"{num_heads} 个头无法均分到 tp_size={tp_size} 个 rank 上{hint}")


def heads_of_rank(num_heads: int, tp_size: int, rank: int, allow_replicate: bool = False) -> range:
    """第 rank 个 rank 拿到的头的编号区间。复制时相邻的 rank 共享同一个头。"""
    if not 0 <= rank < tp_size:
        raise ValueError(f"rank={rank} 超出范围 [0, {tp_size})")
    per_rank, replicas = shard_heads(num_heads, tp_size, allow_replicate)
    # 复制时 rank // replicas 就是它拿的头；这样 rank 上的 Q 头（连续切分）
    # 恰好落在它本地这个 KV 头的分组里（GQA）
    start = int((rank // replicas) * per_rank)
    return range(start, start + int(per_rank))
