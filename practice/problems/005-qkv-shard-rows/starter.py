"""练习 005：张量并行时，第 rank 个 rank 的 qkv_proj 由 q/k/v 投影的哪几段行拼成。"""

from __future__ import annotations


def qkv_pieces(
    num_q_heads: int, num_kv_heads: int, head_dim: int, tp_size: int, rank: int
) -> list[tuple[str, int, int]]:
    """返回 [("q", start, stop), ("k", start, stop), ("v", start, stop)]。

    行号是原投影里的行号，左闭右开。
    - Q 头按顺序均分；KV 头够分时也均分；
    - KV 头不够分时每个 rank 放 1 个：第 rank * num_kv_heads // tp_size 个；
    - 参数不合法、分不均、不能复制时抛 ValueError，信息里写出出问题的数。
    """
    raise NotImplementedError("在这里实现 qkv_pieces")
