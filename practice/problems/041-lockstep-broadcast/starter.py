"""练习 041：rank 0 广播——每一步先对齐消息条数，各 rank 再各取这么多条。"""

from __future__ import annotations

from typing import Any


def to_commands(raw: bytes) -> list[str]:
    """把一帧（UTF-8 JSON）变成命令列表；不合法的帧抛 ValueError（批量帧整帧作废）。"""
    raise NotImplementedError("在这里实现 to_commands")


class RankIO:
    """一个 rank 的输入：rank 0 收、转发；其他 rank 按广播的条数取。"""

    def __init__(self, comm: Any, *, inbox: Any = None, pub: Any = None, sub: Any = None) -> None:
        self.comm = comm
        self.inbox = inbox
        self.pub = pub
        self.sub = sub
        self.dropped = 0

    def receive(self) -> list[str]:
        """这一步的命令；每次调用恰好参加一次 comm.broadcast。"""
        raise NotImplementedError("在这里实现 receive")
