"""练习 002：张量并行时把注意力头分给各个 rank。"""

from __future__ import annotations


def shard_heads(num_heads: int, tp_size: int, allow_replicate: bool = False) -> tuple[int, int]:
    """返回 (每个 rank 的头数, 每个头被复制到几个 rank 上)。

    - num_heads、tp_size 都必须 >= 1；
    - 能整除：(num_heads // tp_size, 1)；
    - 否则仅当 allow_replicate 且 tp_size > num_heads 且 tp_size % num_heads == 0 时：
      (1, tp_size // num_heads)；
    - 其余情况抛 ValueError，信息里包含 num_heads 与 tp_size。
    """
    raise NotImplementedError("在这里实现 shard_heads")


def heads_of_rank(num_heads: int, tp_size: int, rank: int, allow_replicate: bool = False) -> range:
    """第 rank 个 rank 拿到的头的编号区间（range）。

    - 0 <= rank < tp_size，否则 ValueError；
    - 不复制时按顺序连续切分；复制时相邻的 rank 共享同一个头。
    """
    raise NotImplementedError("在这里实现 heads_of_rank")
