"""错误答案：用了 < 而不是 <=，新 token 看不到自己。"""

from __future__ import annotations


def _check(cached_len: int, extend_len: int) -> None:
    if cached_len < 0 or extend_len < 1:
        raise ValueError(f"cached_len={cached_len}, extend_len={extend_len}")


def extend_mask(cached_len: int, extend_len: int) -> list[list[bool]]:
    _check(cached_len, extend_len)
    total = cached_len + extend_len
    return [[t < cached_len + j for t in range(total)] for j in range(extend_len)]  # 错在这里


def batch_mask(reqs: list[tuple[int, int]]) -> list[list[bool]]:
    for c, e in reqs:
        _check(c, e)
    num_keys = sum(c + e for c, e in reqs)
    rows: list[list[bool]] = []
    col = 0
    for c, e in reqs:
        for block_row in extend_mask(c, e):
            row = [False] * num_keys
            row[col : col + len(block_row)] = block_row
            rows.append(row)
        col += c + e
    return rows


def last_indices(reqs: list[tuple[int, int]]) -> list[int]:
    out: list[int] = []
    end = 0
    for c, e in reqs:
        _check(c, e)
        end += e
        out.append(end - 1)
    return out
