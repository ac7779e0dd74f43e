"""练习 042：慢订阅者——PUB 丢掉的第一条广播与 XPUB 的订阅通知。"""

from __future__ import annotations


def xpub_notifications(
    events: list[tuple], verbose: bool = False, verboser: bool = False
) -> list[bytes]:
    """XPUB 对这串订阅、退订、断开事件依次发出的通知。"""
    raise NotImplementedError("在这里实现 xpub_notifications")


def ready_time(events: list[tuple], n: int, verbose: bool = False, verboser: bool = False) -> float:
    """按通知数订阅者（订阅加一、退订减一），同一时刻的通知读完再检查；返回第一次够 n 个的时刻。"""
    raise NotImplementedError("在这里实现 ready_time")


def deliveries(
    subscribers: list[tuple[str, str, float]],
    messages: list[tuple[float, str]],
    wait_for: int = 0,
) -> dict[str, list[str]]:
    """每个订阅者收到的消息；wait_for > 0 时先等 wait_for 个订阅送达再发。"""
    raise NotImplementedError("在这里实现 deliveries")
