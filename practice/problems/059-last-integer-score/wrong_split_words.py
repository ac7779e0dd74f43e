"""错误答案：按空白切词，去掉两头的英文标点再 int()。粘在数字上的全角标点（1801。）去不掉，
这个词就被跳过，拿到的是前面的数。"""

from __future__ import annotations


def last_integer(reply: str) -> int | None:
    last = None
    for word in reply.split():
        word = word.strip(".,!?:;()=")
        try:
            last = int(word)
        except ValueError:
            continue
    return last


def score_add_sub(expected: int, reply: str) -> bool:
    return last_integer(reply) == expected
