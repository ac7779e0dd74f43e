"""错误答案：先把迭代器里的通知全部读完再看够不够——把之后的订阅者的通知也吃掉了。"""

from __future__ import annotations

from typing import Iterator


class SubscriberCounter:
    def __init__(self, topic: bytes = b"") -> None:
        self.topic = topic
        self.count = 0

    def feed(self, note: bytes) -> None:
        kind = note[:1]
        if kind not in (b"\x00", b"\x01"):
            raise ValueError(f"not a subscription notification: {note!r}")
        if note[1:] != self.topic:
            return
        delta = 1 if kind == b"\x01" else -1
        if self.count + delta < 0:
            raise ValueError("more unsubscriptions than subscriptions")
        self.count += delta

    def wait(self, notes: Iterator[bytes], n: int) -> int:
        taken = 0
        if self.count >= n:
            return 0
        for note in notes:  # 错在这里：读完全部才检查
            taken += 1
            self.feed(note)
        if self.count < n:
            raise TimeoutError(f"only {self.count} of {n} subscribers")
        return taken
