"""练习 036：按 uid 分发回复——一条共享的回复流，每个 uid 一个待取列表和一个事件。"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass
class Reply:
    uid: int
    text: str
    finished: bool


class ReplyRouter:
    def __init__(self) -> None:
        self.dropped = 0

    def register(self, uid: int) -> asyncio.Event:
        """开始等 uid 的回复，返回它的事件；uid 还活着时抛 ValueError。"""
        raise NotImplementedError("在这里实现 register")

    def dispatch(self, replies: list[Reply]) -> None:
        """把回复分给各个 uid；没人要的（没登记、已结束、已中止）丢掉并计数。"""
        raise NotImplementedError("在这里实现 dispatch")

    def take(self, uid: int) -> tuple[str, bool]:
        """取走 uid 待取的全部文本和"是否结束"；结束了就删掉状态。"""
        raise NotImplementedError("在这里实现 take")

    def abort(self, uid: int) -> bool:
        """删掉 uid 的状态，返回它之前是否活着。"""
        raise NotImplementedError("在这里实现 abort")

    def active(self) -> list[int]:
        """活着的 uid，从小到大。"""
        raise NotImplementedError("在这里实现 active")
