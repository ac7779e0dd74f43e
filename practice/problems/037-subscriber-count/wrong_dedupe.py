"""错误答案：用集合记"谁订阅了"——重复的通知被合并，两个订阅者只算一个。"""

from __future__ import annotations

from typing import Iterator


class SubscriberCounter:
    def __init__(self, topic: bytes = b"") -> None:
        self.topic = topic
        self.count = 0
        self._seen: set[bytes] = set()

    def feed(self, note: bytes) -> None:
        kind = note[:1]
        if kind not in (b"\x00", b"\x01"):
            raise ValueError(f"not a subscription notification: {note!r}")
        if note[1:] != self.topic:
            return
        if kind == b"\x01":
            self._seen.add(note)  # 错在这里：两条相同的订阅通知只记一次
        elif note.replace(b"\x00", b"\x01", 1) in self._seen:
            self._seen.discard(note.replace(b"\x00", b"\x01", 1))
        else:
            raise ValueError("more unsubscriptions than subscriptions")
        self.count = len(self._seen)

    def wait(self, notes: Iterator[bytes], n: int) -> int:
        taken = 0
        while self.count < n:
            note = next(notes, None)
            if note is None:
                raise TimeoutError(f"only {self.count} of {n} subscribers")
            taken += 1
            self.feed(note)
        return taken
