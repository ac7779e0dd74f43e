"""练习 019：环形 all_reduce——reduce-scatter 加 all-gather，每个 rank 只给下一个 rank 发数据。"""

from __future__ import annotations


def ring_all_reduce(data: list[list[float]]) -> tuple[list[list[float]], list[int]]:
    """data[r] 是第 r 个 rank 的向量。返回 (每个 rank 最后的向量, 每个 rank 一共发送的数的个数)。

    向量切成 N 块，第 c 块是 [c*L//N, (c+1)*L//N)。reduce-scatter 第 s 步 rank r 发第 (r-s)%N 块
    （接收方加上），all-gather 第 s 步 rank r 发第 (r+1-s)%N 块（接收方覆盖）。
    不修改 data；data 为空或长度不同时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 ring_all_reduce")
