"""请求表：页表的每一行同一时刻只属于一个运行中的请求，这里管"哪几行空着"。"""

from __future__ import annotations

__all__ = ["ReqTable"]


class ReqTable:
    """页表行的分配器。行数就是同时运行的请求数上限（``max_running_reqs``）。

    请求开始 prefill 时拿一行，结束时还回来。和 KV 页分开管：一行只是一个"座位"，
    这一行里写哪些槽位由 ``CacheManager`` 决定。
    """

    def __init__(self, num_rows: int) -> None:
        if num_rows < 1:
            raise ValueError(f"num_rows must be >= 1, got {num_rows}")
        self.num_rows = num_rows
        # 倒序放，pop() 先拿到第 0 行：打印出来的行号从小到大，好读
        self._free = list(range(num_rows - 1, -1, -1))
        self._used: set[int] = set()

    @property
    def num_free(self) -> int:
        return len(self._free)

    def allocate(self) -> int:
        if not self._free:
            raise RuntimeError("no free row in the request table")
        row = self._free.pop()
        self._used.add(row)
        return row

    def free(self, row: int) -> None:
        # 还一个不在用的行，一定是某处释放了两次：立即报错，而不是让两个请求共用一行
        if row not in self._used:
            raise RuntimeError(f"row {row} is not in use (double free?)")
        self._used.remove(row)
        self._free.append(row)

    def used_rows(self) -> set[int]:
        return set(self._used)
