"""错误答案：all-gather 时 rank r 发第 (r-s)%N 块——那一块在 rank r 上还不是完整的和。"""

from __future__ import annotations


def ring_all_reduce(data: list[list[float]]) -> tuple[list[list[float]], list[int]]:
    if not data:
        raise ValueError("至少要有一个 rank")
    n, length = len(data), len(data[0])
    if any(len(v) != length for v in data):
        raise ValueError("各 rank 的向量长度不同")
    buf = [list(v) for v in data]
    chunks = [(c * length // n, (c + 1) * length // n) for c in range(n)]
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
        send_all([(r - s) % n for r in range(n)], accumulate=False)  # 错在这里：少了 +1
    return buf, sent
