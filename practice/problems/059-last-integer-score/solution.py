"""练习 059 的参考答案。"""

from __future__ import annotations

import re

# 负号（ASCII 或全角）后面跟着 ASCII 数字；负号前面不能紧挨着数字（那是减号）
_INTEGER = re.compile(r"(?:(?<![0-9])[-－])?[0-9]+")


def last_integer(reply: str) -> int | None:
    """回答里最后一个整数（只认 ASCII 数字；紧挨着的 - 或 － 是负号，除非它前面是数字）；
    没有整数时返回 None。"""
    found = _INTEGER.findall(reply)
    if not found:
        return None
    text = found[-1]
    if text[0] in "-－":
        return -int(text[1:])
    return int(text)


def score_add_sub(expected: int, reply: str) -> bool:
    """回答里最后一个整数等于 expected 时为 True。"""
    return last_integer(reply) == expected
