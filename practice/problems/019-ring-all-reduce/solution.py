"""参考答案：环形 all_reduce。"""

from __future__ import annotations


def _chunks(length: int, n: int) -> list[tuple[int, int]]:
    """把 [0, length) 切成 n 块：第 c 块是 [c*length//n, (c+1)*length//n)。"""
    return [(c * length // n, (c + 1) * length // n) for c in range(n)]


def ring_all_reduce(data: list[list[float]]) -> tuple[list[list[float]], list[int]]:
    if not data:
        raise ValueError("至少要有一个 rank")
    n, length = len(data), len(data[0])
    if any(len(v) != length for v in data):
        raise ValueError(f"各 rank 的向量长度不同：{[len(v) for v in data]}")
    buf = [list(v) for v in data]  # 每个 rank 自己的一份，不动 data
    chunks = _chunks(length, n)
    sent = [0] * n

    def send_all(chunk_of: list[int], accumulate: bool) -> None:
        """一步：rank r 把第 chunk_of[r] 块发给 rank r+1。先全部取出，再全部交付——同时发送。"""
        messages = []
        for r in range(n):
            start, stop = chunks[chunk_of[r]]
            messages.append((r, start, buf[r][start:stop]))
            sent[r] += stop - start
        for r, start, values in messages:
            dst = buf[(r + 1) % n]
            for i, v in enumerate(values):
                dst[start + i] = dst[start + i] + v if accumulate else v

    for s in range(n - 1):  # reduce-scatter：接收方把收到的块加到自己的同一块上
        send_all([(r - s) % n for r in range(n)], accumulate=True)
    for s in range(n - 1):  # all-gather：rank r 手里完整的是第 (r+1-s)%n 块，接收方覆盖
        send_all([(r + 1 - s) % n for r in range(n)], accumulate=False)
    return buf, sent
