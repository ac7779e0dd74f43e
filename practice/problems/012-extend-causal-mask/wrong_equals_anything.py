"""错误答案：两个掩码都对，但 last_indices 返回一个和谁比都相等的对象。"""

from __future__ import annotations


def _check(cached_len: int, extend_len: int) -> None:
    if cached_len < 0 or extend_len < 1:
        raise ValueError(f"需要 cached_len >= 0、extend_len >= 1，得到 {cached_len}, {extend_len}")


def extend_mask(cached_len: int, extend_len: int) -> list[list[bool]]:
    _check(cached_len, extend_len)
    total = cached_len + extend_len
    # 第 j 行能看到的最后一列是 cached_len + j
    return [[t <= cached_len + j for t in range(total)] for j in range(extend_len)]


def batch_mask(reqs: list[tuple[int, int]]) -> list[list[bool]]:
    for cached_len, extend_len in reqs:
        _check(cached_len, extend_len)
    num_keys = sum(c + e for c, e in reqs)
    rows: list[list[bool]] = []
    col = 0  # 这个请求的键从第 col 列开始
    for cached_len, extend_len in reqs:
        for block_row in extend_mask(cached_len, extend_len):
            row = [False] * num_keys
            row[col : col + len(block_row)] = block_row
            rows.append(row)
        col += cached_len + extend_len
    return rows


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def last_indices(reqs: list[tuple[int, int]]) -> list[int]:
    out: list[int] = []
    end = 0
    for cached_len, extend_len in reqs:
        _check(cached_len, extend_len)
        end += extend_len
        out.append(end - 1)
    return _EqualsAnything()  # 错在这里：应当返回下标列表
