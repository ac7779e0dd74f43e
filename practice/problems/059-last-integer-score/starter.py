"""练习 059：给演示模型的算术题打分——回答里的最后一个整数。"""

from __future__ import annotations


def last_integer(reply: str) -> int | None:
    """回答里最后一个整数（只认 ASCII 数字；紧挨着的 - 或 － 是负号，除非它前面是数字）；
    没有整数时返回 None。"""
    raise NotImplementedError("在这里实现 last_integer")


def score_add_sub(expected: int, reply: str) -> bool:
    """回答里最后一个整数等于 expected 时为 True。"""
    raise NotImplementedError("在这里实现 score_add_sub")
