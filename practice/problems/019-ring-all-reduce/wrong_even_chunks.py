"""错误答案：每块都是 L // N 个数，L 不能被 N 整除时，最后几个数不属于任何一块，从来没有被加过。"""

from __future__ import annotations


def ring_all_reduce(data: list[list[float]]) -> tuple[list[list[float]], list[int]]:
    if not data:
        raise ValueError("至少要有一个 rank")
    n, length = len(data), len(data[0])
    if any(len(v) != length for v in data):
        raise ValueError("各 rank 的向量长度不同")
    buf = [list(v) for v in data]
    size = length // n
    chunks = [(c * size, (c + 1) * size) for c in range(n)]  # 错在这里：丢了余数
    sent = [0] * n

    def send_all(chunk_of: list[int], accumulate: bool) -> None:
        messages = []
        for r in range(n):
            start, stop = chunks[chunk_of[r]]
            messages.append((r, start, buf[r][start:stop]))
            sent[r] += stop - start
        for r, start, values in messages:
            dst = buf[(r + 1) % n]
            for i, v in enumerate(values):
                dst[start + i] = dst[start + i] + v if accumulate else v

    for s in range(n - 1):
        send_all([(r - s) % n for r in range(n)], accumulate=True)
    for s in range(n - 1):
        send_all([(r + 1 - s) % n for r in range(n)], accumulate=False)
    return buf, sent
