"""错误答案：只找数字，不看负号。-667 读成 667。"""

from __future__ import annotations

import re


def last_integer(reply: str) -> int | None:
    found = re.findall(r"[0-9]+", reply)
    return int(found[-1]) if found else None


def score_add_sub(expected: int, reply: str) -> bool:
    return last_integer(reply) == expected
