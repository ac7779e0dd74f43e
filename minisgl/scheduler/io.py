"""调度器的输入输出：请求从哪里来，生成的 token 到哪里去。

``run_forever`` 只认识两个动作：``receive()`` 取回新到的命令，``send()`` 交出这一步的输出。
本章只有进程内的实现 ``LocalIO``（两个线程安全的队列），测试里用它从另一个线程喂请求；离线的
``LLM`` 更简单，直接调用 ``add_request`` 和 ``step``。第 14 章在这里加上 ZMQ 的实现，调度循环
一行不改，就从"一个函数"变成"一个进程"。
"""

from __future__ import annotations

import queue
from abc import ABC, abstractmethod
from dataclasses import dataclass

from .utils import PendingReq, TokenOutput

__all__ = ["ExitReq", "LocalIO", "SchedulerCommand", "SchedulerIO"]


@dataclass(frozen=True)
class ExitReq:
    """让 ``run_forever`` 退出。"""


# ~~ ch08 < ch11
# ~ SchedulerCommand = PendingReq | ExitReq
# ~~
# >> ch11
from .utils import AbortReq

SchedulerCommand = PendingReq | AbortReq | ExitReq
# << ch11


class SchedulerIO(ABC):
    @abstractmethod
    def receive(self, blocking: bool) -> list[SchedulerCommand]:
        """取回所有已经到达的命令。``blocking``：调度器手上没活时，至少等到一条再返回，
        而不是空转占满一个 CPU 核。"""

    @abstractmethod
    def send(self, outputs: list[TokenOutput]) -> None: ...

    def close(self) -> None:  # noqa: B027 —— 大多数实现没有要关的东西
        """释放 socket 之类的资源。"""


class LocalIO(SchedulerIO):
    """同一个进程里的输入输出：客户端线程 ``submit()``、``get()``；调度线程 ``receive()``、
    ``send()``。"""

    def __init__(self) -> None:
        self.inbox: queue.Queue[SchedulerCommand] = queue.Queue()
        self.outbox: queue.Queue[TokenOutput] = queue.Queue()

    # 客户端这一侧
    def submit(self, command: SchedulerCommand) -> None:
        self.inbox.put(command)

    def get(self, timeout: float | None = None) -> TokenOutput:
        return self.outbox.get(timeout=timeout)

    # 调度器这一侧
    def receive(self, blocking: bool) -> list[SchedulerCommand]:
        commands: list[SchedulerCommand] = []
        if blocking:
            commands.append(self.inbox.get())
        while True:
            try:
                commands.append(self.inbox.get_nowait())
            except queue.Empty:
                return commands

    def send(self, outputs: list[TokenOutput]) -> None:
        for out in outputs:
            self.outbox.put(out)
