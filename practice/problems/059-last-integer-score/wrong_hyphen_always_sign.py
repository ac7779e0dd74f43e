"""错误答案：评测脚本里的简单写法 -?[0-9]+（再加上全角负号）：紧跟在数字后面的减号也当成负号，
1234-567 的最后一个数读成了 -567。"""

from __future__ import annotations

import re

_INTEGER = re.compile(r"[-－]?[0-9]+")


def last_integer(reply: str) -> int | None:
    found = _INTEGER.findall(reply)
    if not found:
        return None
    text = found[-1]
    if text[0] in "-－":
        return -int(text[1:])
    return int(text)


def score_add_sub(expected: int, reply: str) -> bool:
    return last_integer(reply) == expected
