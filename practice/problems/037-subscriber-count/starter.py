"""练习 037：数 XPUB 的订阅通知，等订阅者到齐。"""

from __future__ import annotations

from typing import Iterator


class SubscriberCounter:
    def __init__(self, topic: bytes = b"") -> None:
        self.topic = topic
        self.count = 0

    def feed(self, note: bytes) -> None:
        """处理一条通知：b"\\x01"+主题 订阅，b"\\x00"+主题 退订；坏的通知抛 ValueError。"""
        raise NotImplementedError("在这里实现 feed")

    def wait(self, notes: Iterator[bytes], n: int) -> int:
        """一条条取通知直到 count >= n，返回取了几条；取完还不够抛 TimeoutError。"""
        raise NotImplementedError("在这里实现 wait")
