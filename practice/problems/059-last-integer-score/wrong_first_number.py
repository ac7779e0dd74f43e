"""错误答案：取第一个整数。算式抄在前面，第一个数是题目里的数，不是结果。"""

from __future__ import annotations

import re

_INTEGER = re.compile(r"(?:(?<![0-9])[-－])?[0-9]+")


def last_integer(reply: str) -> int | None:
    found = _INTEGER.findall(reply)
    if not found:
        return None
    text = found[0]
    if text[0] in "-－":
        return -int(text[1:])
    return int(text)


def score_add_sub(expected: int, reply: str) -> bool:
    return last_integer(reply) == expected
