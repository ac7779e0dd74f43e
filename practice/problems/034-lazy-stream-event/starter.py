"""练习 034：懒执行的 stream 与 event——在 CPU 上看见重叠调度里的异步。"""

from __future__ import annotations

from typing import Callable


class Stream:
    """一条懒执行的流：提交的工作先排队，按提交顺序执行，只在有人同步时才真正运行。"""

    def __init__(self, name: str = "") -> None:
        self.name = name

    def submit(self, fn: Callable[[], object]) -> None:
        """把 fn 排进队列，现在不运行。"""
        raise NotImplementedError("在这里实现 submit")

    def wait_event(self, event: Event) -> None:
        """之后提交到这条流的工作，要等 event（按现在的记录点）覆盖的工作跑完才能运行。"""
        raise NotImplementedError("在这里实现 wait_event")

    def synchronize(self) -> None:
        """运行这条流上所有还没运行的工作（先满足它们等待的 event）。"""
        raise NotImplementedError("在这里实现 synchronize")

    def pending(self) -> int:
        """这条流上提交了、还没运行的工作有几个。"""
        raise NotImplementedError("在这里实现 pending")


class Event:
    """流上的一个记录点。"""

    def __init__(self) -> None:
        pass

    def record(self, stream: Stream) -> None:
        """记下 stream 上到目前为止提交的工作；再 record 一次就换成新的记录点。"""
        raise NotImplementedError("在这里实现 record")

    def query(self) -> bool:
        """记录点之前的工作是否都运行完了（不触发任何运行）；没 record 过时为 True。"""
        raise NotImplementedError("在这里实现 query")

    def synchronize(self) -> None:
        """运行记录点之前还没运行的工作，不多运行；没 record 过时什么也不做。"""
        raise NotImplementedError("在这里实现 synchronize")
