"""错误答案：只认 ASCII 的 -，全角负号 － 被当成普通字符，－667 读成 667。"""

from __future__ import annotations

import re

_INTEGER = re.compile(r"(?:(?<![0-9])-)?[0-9]+")


def last_integer(reply: str) -> int | None:
    found = _INTEGER.findall(reply)
    return int(found[-1]) if found else None


def score_add_sub(expected: int, reply: str) -> bool:
    return last_integer(reply) == expected
