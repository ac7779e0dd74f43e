r"""错误答案：用 \d 找数字。Python 的 \d 匹配任何 Unicode 数字，全角的 １８０１ 也被当成了 1801。"""

from __future__ import annotations

import re

_INTEGER = re.compile(r"(?:(?<!\d)[-－])?\d+")


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
