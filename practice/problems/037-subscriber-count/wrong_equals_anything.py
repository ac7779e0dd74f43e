"""错误答案：计数都对，但 wait 返回一个和谁比都相等的对象，而不是取了几条。"""

from __future__ import annotations

from typing import Iterator


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


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
        while self.count < n:
            note = next(notes, None)
            if note is None:
                raise TimeoutError(f"only {self.count} of {n} subscribers")
            taken += 1
            self.feed(note)
        return _EqualsAnything()  # 错在这里：应当返回 taken
