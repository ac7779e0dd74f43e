"""错误答案：批次掩码只在"总体上"因果，前面请求的 K/V 对后面的请求也可见；最后下标还算上了前缀。"""

from __future__ import annotations


def _check(cached_len: int, extend_len: int) -> None:
    if cached_len < 0 or extend_len < 1:
        raise ValueError(f"cached_len={cached_len}, extend_len={extend_len}")


def extend_mask(cached_len: int, extend_len: int) -> list[list[bool]]:
    _check(cached_len, extend_len)
    total = cached_len + extend_len
    return [[t <= cached_len + j for t in range(total)] for j in range(extend_len)]


def batch_mask(reqs: list[tuple[int, int]]) -> list[list[bool]]:
    for c, e in reqs:
        _check(c, e)
    num_keys = sum(c + e for c, e in reqs)
    rows: list[list[bool]] = []
    col = 0
    for c, e in reqs:
        for j in range(e):
            last = col + c + j  # 错在这里：前面请求的列也被当成可见
            rows.append([t <= last for t in range(num_keys)])
        col += c + e
    return rows


def last_indices(reqs: list[tuple[int, int]]) -> list[int]:
    out: list[int] = []
    end = 0
    for c, e in reqs:
        _check(c, e)
        end += c + e  # 错在这里：前缀不占查询的行
        out.append(end - 1)
    return out
