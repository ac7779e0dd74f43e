"""KV 页的账目：空闲列表、按需分配、请求结束时归还，以及一个真正会失败的完整性检查。"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from minisgl.attention import page_slots
from minisgl.kvcache import BasePrefixCache, CacheHandle
from minisgl.utils import (
    # >> ch10
    align_down,
    # << ch10
    div_ceil,
)

from .utils import SchedReq

__all__ = ["CacheManager"]


# >> ch19
import array
import itertools

import numpy as np

from minisgl.utils.device import to_device

# 空闲页不够时，一次至少淘汰池子的这么多分之一。淘汰要把整棵树走一遍（第 10 章）；缓存占满池子
# 之后只淘汰刚好够的页，就是每个新请求、每一步跨页的 decode 都走一遍。多腾出的页本来就是最久没用的，
# 下一次分配直接从空闲列表里拿
EVICT_FRACTION = 64
# 页表写入的一段超过这么多个格子时用 numpy 生成（见 flush_writes）
NUMPY_SEGMENT = 64


# << ch19
class CacheManager:
    """管 KV 池里的页：每一页在任何时刻恰好处于三种状态之一——

    - 空闲：在 ``_free`` 里，谁都可以拿；
    - 被缓存：归前缀缓存所有（第 10 章；naive 时没有这种页）；
    - 被占用：某个运行中请求自己的页（``req.pages`` 里前缀之后的那些）。

    分配是"按需"的：请求每走一步，只补上这一步要写的 token 所在的页。会不会中途不够用，
    由 ``PrefillManager`` 在接纳请求时预留保证，这里只负责记账。
    """

    def __init__(
        self,
        num_pages: int,
        page_size: int,
        page_table: torch.Tensor,
        prefix_cache: BasePrefixCache,
    ) -> None:
        self.num_pages = num_pages
        self.page_size = page_size
        self.page_table = page_table
        self.prefix_cache = prefix_cache
        self._free = list(range(num_pages - 1, -1, -1))  # pop() 先拿小号的页
        self._free_set = set(self._free)
        # >> ch19
        # 攒着还没写进页表的 (行, 起始页, 页号)；None：write_row 立刻写（见 defer_writes）
        self._pending: list[tuple[int, int, list[int]]] | None = None
        # << ch19

    # ------------------------------------------------------------ 数量

    @property
    def num_free_pages(self) -> int:
        return len(self._free)

    @property
    def available_pages(self) -> int:
        """现在能拿到的页：空闲的，加上前缀缓存里没被锁住、可以淘汰的。"""
        return self.num_free_pages + self.prefix_cache.size_info[0]

    def pages_for(self, num_tokens: int) -> int:
        return div_ceil(num_tokens, self.page_size)

    # ------------------------------------------------------------ 分配与释放

    def allocate(self, num_pages: int) -> list[int]:
        if num_pages > len(self._free):
            # 空闲页不够：淘汰前缀缓存里没人用的页（naive 时什么也淘汰不出来）
            # ~~ ch08 < ch19
            # ~ self.free(self.prefix_cache.evict(num_pages - len(self._free)))
            # ~~
            # >> ch19
            shortfall = num_pages - len(self._free)
            self.free(self.prefix_cache.evict(max(shortfall, self.num_pages // EVICT_FRACTION)))
            # << ch19
        if num_pages > len(self._free):
            raise RuntimeError(
                f"out of KV pages: need {num_pages}, {len(self._free)} free "
                f"(the admission check should have prevented this)"
            )
        # 从末尾整段切下来，倒过来：和逐个 pop() 拿到的页、顺序都一样
        start = len(self._free) - num_pages
        pages = self._free[start:][::-1]
        del self._free[start:]
        self._free_set.difference_update(pages)
        return pages

    def free(self, pages: Iterable[int]) -> None:
        pages = list(pages)
        fresh = set(pages)
        ok = len(fresh) == len(pages) and fresh.isdisjoint(self._free_set)
        if ok and (not pages or 0 <= min(pages) and max(pages) < self.num_pages):
            self._free += pages  # 常见情形：整批一次放回去（淘汰一次就是几百上千页）
            self._free_set |= fresh
            return
        for page in pages:  # 有重复、已经空闲或者越界的：逐页放，在出问题的那一页报错
            self._push_free(page)

    def _push_free(self, page: int) -> None:
        # 释放两次是调度器的 bug（mini-sglang PR #111 就是这样一个 bug）：当场报错，
        # 否则同一页会被分给两个请求，互相覆盖 KV，输出悄悄变错
        if page in self._free_set or not 0 <= page < self.num_pages:
            raise RuntimeError(f"page {page} is already free or out of range (double free?)")
        self._free.append(page)
        self._free_set.add(page)

    def match_req(self, input_ids: torch.Tensor) -> tuple[CacheHandle, list[int]]:
        """新请求能复用的前缀。最后一个 token 不参与匹配：它总得重算一遍，才有 logits 可以采样。"""
        return self.prefix_cache.match_prefix(input_ids[:-1].tolist())

    def pages_missing(self, req: SchedReq, num_tokens: int) -> int:
        """请求还差几页才放得下前 ``num_tokens`` 个 token（已经够了就是 0）。"""
        return max(0, self.pages_for(num_tokens) - len(req.pages))

    def ensure_pages(self, req: SchedReq, num_tokens: int) -> None:
        """让请求的页够放前 ``num_tokens`` 个 token，新拿到的页写进页表它那一行。"""
        missing = self.pages_missing(req, num_tokens)
        if missing > 0:
            start = len(req.pages)
            req.pages += self.allocate(missing)
            self.write_row(req, start)

    # >> ch19
    def ensure_decode_pages(self, reqs: Iterable[SchedReq]) -> None:
        """decode 这一步的 ``ensure_pages(req, req.device_len)``，对整批请求一起做：缺的页一次分配，
        新槽位攒起来，一次拷到设备、一次写进页表。

        逐个写时，每个跨页的请求一次主机到设备的小拷贝（页大小为 1 时就是每个请求每一步一次），
        而且是从可分页内存拷的——CUDA 要先等流上排着的前向全部算完才开始拷，第 11 章的重叠就白做了。
        逐个分配也不便宜：batch 256、页大小为 1 时，每一步 256 次 ``allocate``。
        """
        reqs = list(reqs)
        missing = [self.pages_missing(req, req.device_len) for req in reqs]
        pages = iter(self.allocate(sum(missing)))  # 和逐个分配拿到的页、顺序都一样
        self.defer_writes()
        for req, n in zip(reqs, missing):
            if n:
                start = len(req.pages)
                req.pages += itertools.islice(pages, n)
                self.write_row(req, start)
        self.flush_writes()

    def defer_writes(self) -> None:
        """从现在起到 ``flush_writes``，``write_row`` 只把要写的页记下来。

        prefill 接纳的每个请求都要写页表（命中的前缀、这一步要用的页）：逐个写就是逐个一次主机到
        设备的小拷贝，和 decode 一样的问题。攒起来，整批一起写。
        """
        if self._pending is not None:  # 再开一次就把攒着的写入丢了
            raise RuntimeError("defer_writes called twice: flush_writes first")
        self._pending = []

    def flush_writes(self) -> None:
        """把攒下的页表写入一次做完，回到立刻写的模式。

        页表按一维看，第 ``行 × 列数 + 列`` 个格子；要写的格子和槽位在主机上拼成一个 int32 的
        ``array``，一次拷到设备，一次 ``index_put_`` 写进去。每一次小拷贝、每一个小算子在主机上都要
        几到几十微秒（第 19 章的剖析：H200 那台机器上，为一个请求的一页写页表要 0.15 毫秒），
        batch 1 的 decode 每一步都要走这里，所以拷贝和算子都只有一次。

        拼法按段的长短分两种。decode 每个请求一两页：``extend`` 最快，numpy 每次调用的固定开销反而
        更大。prefill 一段就是整个提示：``extend`` 要把成千上万个 Python 整数逐个转换，页大于 1 时
        还要经过一个生成器；numpy 整段生成、整段拷进来。
        """
        pending, self._pending = self._pending or [], None
        if not pending:
            return
        size, columns = self.page_size, self.page_table.shape[1]
        cells, slots = array.array("i"), array.array("i")
        for row, first, pages in pending:
            begin = row * columns + first * size
            n = len(pages) * size
            if n > NUMPY_SEGMENT:
                cells.frombytes(np.arange(begin, begin + n, dtype=np.int32).tobytes())
                # 槽位的算法同 page_slots，用 numpy 写：它的几个 torch 小算子每次要几十微秒
                page_starts = np.array(pages, dtype=np.int32)[:, None] * size  # 每页第一个槽位
                slots.frombytes((page_starts + np.arange(size, dtype=np.int32)).tobytes())
            else:
                cells.extend(range(begin, begin + n))
                slots.extend(
                    pages if size == 1 else (p * size + j for p in pages for j in range(size))
                )
        both = to_device(torch.frombuffer(cells + slots, dtype=torch.int32), self.page_table.device)
        self.page_table.view(-1).index_put_((both[: len(cells)],), both[len(cells) :])

    # << ch19
    def write_row(self, req: SchedReq, first_page: int = 0) -> None:
        """把 ``req.pages[first_page:]`` 换算成槽位，写进页表第 ``req.table_idx`` 行的对应列。"""
        pages = req.pages[first_page:]
        if not pages:
            return
        # >> ch19
        if self._pending is not None:  # 整批一起写（defer_writes）：页号现在就抄下来
            self._pending.append((req.table_idx, first_page, pages))
            return
        # << ch19
        begin = first_page * self.page_size
        slots = page_slots(pages, self.page_size, len(pages) * self.page_size)
        row = self.page_table[req.table_idx]
        row[begin : begin + len(slots)] = slots.to(row.device, non_blocking=True)

    # >> ch10
    def cache_req(self, req: SchedReq) -> None:
        """把请求已经算好 KV 的整页交给前缀缓存，以后的请求就能复用。

        交过去之后再匹配一次：缓存里原本就有的部分，页号和请求自己的不同——那是两个请求各算了
        一遍的重复 KV，请求这边的那几页还回空闲列表，页表这一行改指缓存的页。最后把锁从旧的
        前缀挪到新的、更长的前缀上。不满一页的尾巴仍归请求自己。
        """
        done = align_down(min(req.cached_len, req.host_len), self.page_size)
        old = req.cache_handle.cached_len // self.page_size
        if done // self.page_size <= old:
            return
        ids = req.input_ids[:done].tolist()
        self.prefix_cache.insert_prefix(ids, req.pages[: done // self.page_size])
        handle, tree_pages = self.prefix_cache.match_prefix(ids)  # naive：什么也匹配不到
        self.prefix_cache.lock(handle)
        self.prefix_cache.unlock(req.cache_handle)
        # 最常见的是缓存里就是它刚交过去的那些页：先整段比一次（在 C 里），不同时才逐页找
        mine, theirs = req.pages[old : len(tree_pages)], tree_pages[old:]
        duplicates = [] if mine == theirs else [p for p, q in zip(mine, theirs) if p != q]
        req.pages[: len(tree_pages)] = tree_pages
        req.cache_handle = handle
        if duplicates:
            self.free(duplicates)
            self.write_row(req, old)

    # << ch10
    def release_req(self, req: SchedReq) -> None:
        """请求结束：解锁它用的前缀，它自己的页还回空闲列表。"""
        num_cached = req.cache_handle.cached_len // self.page_size
        self.prefix_cache.unlock(req.cache_handle)
        self.free(req.pages[num_cached:])
        req.pages = []
        req.cache_handle = CacheHandle(0)

    # ------------------------------------------------------------ 完整性

    def check_integrity(self, reqs: Iterable[SchedReq]) -> None:
        """每一页恰好在一处：空闲、被缓存、或者属于某一个运行中的请求；加起来正好是全部页。

        另外，每个请求前缀部分的页必须在缓存里。不对就抛 ``RuntimeError``，说明是哪一页。
        """
        problems: list[str] = []
        if len(self._free) != len(self._free_set):
            problems.append("the free list has duplicates")
        cached = self.prefix_cache.cached_pages()
        cached_set = set(cached)
        if len(cached) != len(cached_set):
            problems.append("the prefix cache holds a page twice")
        owner: dict[int, str] = {p: "free" for p in self._free_set}
        for p in cached_set:
            if p in owner:
                problems.append(f"page {p} is both cached and {owner[p]}")
            owner[p] = "cached"
        for req in reqs:
            num_cached = req.cache_handle.cached_len // self.page_size
            for p in req.pages[:num_cached]:
                if p not in cached_set:
                    problems.append(f"prefix page {p} of uid {req.uid} is not in the cache")
            for p in req.pages[num_cached:]:
                if p in owner:
                    problems.append(f"page {p} of uid {req.uid} is also {owner[p]}")
                owner[p] = f"held by uid {req.uid}"
        if len(owner) != self.num_pages or any(not 0 <= p < self.num_pages for p in owner):
            lost = sorted(set(range(self.num_pages)) - set(owner))
            problems.append(f"{len(owner)}/{self.num_pages} pages accounted for, lost {lost[:8]}")
        try:
            self.prefix_cache.check_integrity()
        except RuntimeError as e:
            problems.append(str(e))
        if problems:
            raise RuntimeError("KV page accounting is broken: " + "; ".join(problems[:8]))
