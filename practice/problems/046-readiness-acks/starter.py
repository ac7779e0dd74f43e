"""练习 046：启动器等齐就绪消息（ack）——数够了开门，有进程先退出就报错，时限到了也报错。"""

from __future__ import annotations


def expected_acks(tp: int, num_tokenizer: int) -> int:
    """启动器要等的 ack 条数。"""
    raise NotImplementedError("在这里实现 expected_acks")


def process_names(tp: int, num_tokenizer: int) -> list[str]:
    """所有子进程的名字：scheduler-i、detokenizer、tokenizer-i。"""
    raise NotImplementedError("在这里实现 process_names")


def wait_until_ready(
    events: list[tuple[float, str, str]],
    tp: int,
    num_tokenizer: int,
    timeout: float | None = None,
) -> tuple[str, float]:
    """模拟启动器的等待：("ready" | "failed: 名字" | "timeout" | "hang", 时刻)。"""
    raise NotImplementedError("在这里实现 wait_until_ready")
