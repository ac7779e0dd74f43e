"""练习 045：有序关闭——ExitMsg、terminate、kill、删文件，每一步都有时限。"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Proc:
    name: str
    kind: str  # "scheduler" 或 "tokenizer"
    alive: bool = True  # False：关闭开始之前就已经崩掉了
    on_exit_msg: float | None = None  # 调度器收到 ExitMsg 后几秒退出；None：卡住了
    on_sigterm: float | None = 0.0  # 收到 SIGTERM 后几秒退出；None：不理 SIGTERM
    socket_file: str | None = None  # 它 bind 的 ipc 文件


def shutdown(
    procs: list[Proc], files: list[str], timeout: float = 10.0, grace: float = 5.0
) -> list[tuple[float, str, str]]:
    """模拟启动器的关闭流程，返回 [(时刻, 动作, 对象), ...]。"""
    raise NotImplementedError("在这里实现 shutdown")
