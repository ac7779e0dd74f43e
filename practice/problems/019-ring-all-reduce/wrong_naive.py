"""错误答案：每个 rank 把整个向量发给所有别的 rank，各自从 rank 0 起按顺序求和。

和是对的（整数时），但每个 rank 发送了 (N-1)·L 个数，而且浮点数的累加顺序不是环上的顺序。
"""

from __future__ import annotations


def ring_all_reduce(data: list[list[float]]) -> tuple[list[list[float]], list[int]]:
    if not data:
        raise ValueError("至少要有一个 rank")
    n, length = len(data), len(data[0])
    if any(len(v) != length for v in data):
        raise ValueError("各 rank 的向量长度不同")
    total = []
    for i in range(length):
        acc = data[0][i]
        for r in range(1, n):
            acc = acc + data[r][i]
        total.append(acc)
    return [list(total) for _ in range(n)], [(n - 1) * length] * n
