"""参考答案：每一页一个状态，缓存页另记锁计数；结束时没还的页记为泄漏。"""

from __future__ import annotations

from typing import NamedTuple


class AccountingError(Exception):
    """日志里有不合法的操作。已经写好。"""


class Books(NamedTuple):
    """重放完之后的账目。已经写好，不要改。"""

    free: int  # 空闲的页数
    cached: int  # 缓存里可以淘汰的页数（/metrics 的 kv_pages_cached）
    locked: int  # 缓存里被活着的请求锁住的页数
    held: int  # 活着的请求自己拿着的页数
    leaked: tuple[int, ...]  # 泄漏的页号，升序
    running: tuple[int, ...]  # 还活着的请求的 uid，升序
    rows_free: int  # 空闲的请求表行数


FREE, CACHED, LEAKED = "free", "cached", "leaked"  # 其余状态是持有者的 uid（int）


class _Ledger:
    def __init__(self, num_pages: int, num_rows: int) -> None:
        self.num_pages, self.num_rows = num_pages, num_rows
        self.state: list[object] = [FREE] * num_pages
        self.locks: dict[int, int] = {}  # 缓存页 -> 锁它的活着的请求数
        self.rows: dict[int, int] = {}  # 占着的行 -> uid
        self.live: dict[int, tuple[int, list[int]]] = {}  # uid -> (行, 命中的页)
        self.seen: set[int] = set()

    def _pages(self, pages: list[int], want: object, what: str) -> None:
        if len(set(pages)) != len(pages):
            raise ValueError(f"duplicate pages in {list(pages)}")
        for p in pages:
            if not (isinstance(p, int) and 0 <= p < self.num_pages):
                raise ValueError(f"page {p!r} is out of range")
            if self.state[p] != want:
                raise ValueError(f"page {p} is not {what} (it is {self.state[p]!r})")

    def _live(self, uid: int) -> None:
        if uid not in self.live:
            raise ValueError(f"uid {uid} is not running")

    def admit(self, uid: int, row: int, pages: list[int], hits: list[int]) -> None:
        if uid in self.seen:
            raise ValueError(f"uid {uid} was admitted before")
        if not (isinstance(row, int) and 0 <= row < self.num_rows) or row in self.rows:
            raise ValueError(f"row {row!r} is not a free row")
        self._pages(pages, FREE, "free")
        self._pages(hits, CACHED, "in the cache")
        self.seen.add(uid)
        self.rows[row] = uid
        self.live[uid] = (row, list(hits))
        for p in pages:
            self.state[p] = uid
        for p in hits:
            self.locks[p] += 1

    def alloc(self, uid: int, pages: list[int]) -> None:
        self._live(uid)
        self._pages(pages, FREE, "free")
        for p in pages:
            self.state[p] = uid

    def end(self, uid: int, to_cache: list[int], to_free: list[int]) -> None:
        self._live(uid)
        self._pages([*to_cache, *to_free], uid, f"held by uid {uid}")
        row, hits = self.live.pop(uid)
        del self.rows[row]
        for p in hits:
            self.locks[p] -= 1
        for p in to_cache:
            self.state[p] = CACHED
            self.locks[p] = 0
        for p in to_free:
            self.state[p] = FREE
        for p in range(self.num_pages):  # 还拿在手里的：从此没人会还
            if self.state[p] == uid:
                self.state[p] = LEAKED

    def evict(self, pages: list[int]) -> None:
        self._pages(pages, CACHED, "in the cache")
        for p in pages:
            if self.locks[p] > 0:
                raise ValueError(f"page {p} is locked by {self.locks[p]} running request(s)")
        for p in pages:
            self.state[p] = FREE
            del self.locks[p]

    def books(self) -> Books:
        cached = [p for p, s in enumerate(self.state) if s == CACHED]
        return Books(
            free=self.state.count(FREE),
            cached=sum(1 for p in cached if self.locks[p] == 0),
            locked=sum(1 for p in cached if self.locks[p] > 0),
            held=sum(1 for s in self.state if isinstance(s, int)),
            leaked=tuple(p for p, s in enumerate(self.state) if s == LEAKED),
            running=tuple(sorted(self.live)),
            rows_free=self.num_rows - len(self.rows),
        )


def audit(num_pages: int, num_rows: int, log: list[tuple]) -> Books:
    """重放 log；不合法的事件抛 AccountingError("event i: ...")。"""
    ledger = _Ledger(num_pages, num_rows)
    handlers = {"admit": ledger.admit, "alloc": ledger.alloc, "end": ledger.end}
    for i, event in enumerate(log):
        try:
            kind, *args = event
            if kind == "evict":
                ledger.evict(*args)
            elif kind in handlers:
                handlers[kind](*args)
            else:
                raise ValueError(f"unknown event {kind!r}")
        except (ValueError, TypeError) as e:
            raise AccountingError(f"event {i}: {e}") from None
    return ledger.books()


def is_idle(books: Books, num_pages: int, num_rows: int) -> bool:
    """没有活着的请求，空闲页 + 可淘汰的缓存页 == 总页数，行全部空闲。"""
    return (
        not books.running and books.free + books.cached == num_pages and books.rows_free == num_rows
    )
