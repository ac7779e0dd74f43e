"""第 19 章：调度器的主机开销——换了更快的写法，结果必须和原来的一模一样。

- prefill 的页表写入攒成一批（``defer_writes`` / ``flush_writes``）：写出的页表和逐行写的相同
  （短的段和长的段拼法不同，两种都有），整批只拷一次（行、列、槽位拼在一起），不随请求数增长；
  调度器接纳一批请求后，页表就是各请求的页；
- 空闲列表整段切下、整批放回：拿到的页和逐个 ``pop()`` 的相同，重复、越界照样当场报错；
- radix 树比较公共前缀先整段比：结果和一页一页地比相同（包括停在半页的不同）；
- ``append_host`` 写进按容量翻倍的缓冲区：和每次 ``torch.cat`` 的结果相同，早先拿到的
  ``input_ids`` 不变，从别的请求接过来的 ``input_ids`` 先拷一份再追加；
- 缓存占满池子时一次淘汰一批（池子的 1/``EVICT_FRACTION``）：淘汰的仍是最久没用的，
  之后的分配直接从空闲列表拿，不再每次都走一遍树。
"""

from __future__ import annotations

import random

import pytest
import torch

from minisgl.core import Req, SamplingParams
from minisgl.kvcache import RadixPrefixCache, create_prefix_cache
from minisgl.scheduler import PendingReq, PrefillManager, ReqTable
from minisgl.scheduler.cache import EVICT_FRACTION, NUMPY_SEGMENT, CacheManager
from minisgl.scheduler.utils import SchedReq


def _manager(page_size: int, rows: int = 8, columns: int = 96) -> CacheManager:
    table = torch.full((rows, columns), -1, dtype=torch.int32)
    return CacheManager(512, page_size, table, create_prefix_cache("naive", page_size))


def _writes(manager: CacheManager, rng: random.Random) -> None:
    """几个请求：先写整行（像命中了前缀的新请求），再补页写后半段（像 ensure_pages）。
    第 0 个请求补到整行（长的一段，numpy 拼），命中的前缀都不超过 6 页（短的段，逐个拼）。"""
    columns = manager.page_table.shape[1]
    for i in range(8):
        req = SchedReq(torch.arange(5, dtype=torch.int32), table_idx=i, uid=i)
        req.pages = manager.allocate(rng.randint(0, 6))
        manager.write_row(req)
        manager.ensure_pages(req, columns if i == 0 else rng.randint(1, 90))


@pytest.mark.parametrize("page_size", [1, 4])
def test_deferred_writes_give_the_same_table_as_row_by_row(page_size: int) -> None:
    one, batched = _manager(page_size), _manager(page_size)
    assert 6 * page_size <= NUMPY_SEGMENT < 96 - 6 * page_size  # 两种段都有
    _writes(one, random.Random(page_size))
    batched.defer_writes()
    _writes(batched, random.Random(page_size))
    assert torch.equal(batched.page_table, torch.full_like(one.page_table, -1))  # 还没写
    batched.flush_writes()
    assert torch.equal(one.page_table, batched.page_table)
    assert one._free == batched._free
    req = SchedReq(torch.arange(5, dtype=torch.int32), table_idx=0, uid=0)
    req.pages = [7]
    batched.write_row(req)  # flush 之后回到立刻写
    assert batched.page_table[0, :page_size].tolist() == list(range(7 * page_size, 8 * page_size))


def test_a_prefill_batch_takes_one_copy(page_table_copies: list[int]) -> None:
    calls = page_table_copies
    manager = _manager(1)
    prefill = PrefillManager(manager, ReqTable(8), max_extend_tokens=1000)
    for uid in range(6):
        ids = torch.arange(uid + 3, dtype=torch.int32)
        prefill.add(PendingReq(uid, ids, SamplingParams(max_tokens=2), output_len=2))
    manager.defer_writes()
    reqs = prefill.schedule(reserved_pages=0)
    assert calls == []
    manager.flush_writes()
    assert len(reqs) == 6 and len(calls) == 1  # 行、列、槽位拼在一起，一次拷完
    for req in reqs:
        assert manager.page_table[req.table_idx, : req.device_len].tolist() == req.pages


def test_allocate_takes_the_same_pages_as_popping_one_by_one() -> None:
    manager = _manager(2)
    assert manager.allocate(3) == [0, 1, 2]
    assert manager.allocate(0) == [] and manager.num_free_pages == 509
    manager.free([1, 0])
    assert manager.allocate(2) == [0, 1]  # 后放回的先拿到
    manager.free([2, 0, 1])
    manager.check_integrity([])
    assert manager.allocate(3) == [1, 0, 2]


def test_nested_defer_writes_is_an_error() -> None:
    manager = _manager(1)
    manager.defer_writes()
    with pytest.raises(RuntimeError, match="flush_writes"):
        manager.defer_writes()  # 再来一次会把攒着的写入丢掉：当场报错
    manager.flush_writes()
    manager.defer_writes()  # flush 之后可以重新开始攒
    manager.flush_writes()


def test_a_full_cache_is_evicted_a_batch_at_a_time() -> None:
    num_pages, batch = 640, 640 // EVICT_FRACTION
    table = torch.full((4, 16), -1, dtype=torch.int32)
    manager = CacheManager(num_pages, 1, table, create_prefix_cache("radix", 1))
    cache = manager.prefix_cache
    prefixes = [[i, i] for i in range(num_pages // 2)]  # 320 个两页的前缀，先插入的最久没用
    for ids in prefixes:
        cache.insert_prefix(ids, manager.allocate(2))
    assert manager.num_free_pages == 0 and manager.available_pages == num_pages
    calls: list[int] = []
    evict = cache.evict
    cache.evict = lambda n: calls.append(n) or evict(n)  # type: ignore[method-assign]
    got = [manager.allocate(1) for _ in range(batch)]
    assert calls == [batch]  # 第一次分配淘汰一整批，后面的都从空闲列表拿
    assert manager.num_free_pages == 0 and len({p for g in got for p in g}) == batch
    for i, ids in enumerate(prefixes[: batch // 2 + 1]):
        matched = cache.match_prefix(ids)[0].cached_len
        assert matched == (0 if i < batch // 2 else 2)  # 淘汰的恰好是最早的那几个
    got.append(manager.allocate(3))  # 空闲列表又空了：再淘汰一批
    assert calls == [batch, batch] and manager.num_free_pages == batch - 3
    manager.free(p for g in got for p in g)
    manager.check_integrity([])  # 拿走的页还回来之后，每一页都在空闲列表或者缓存里


@pytest.mark.parametrize("bad", [[3, 4, 3], [5, 600], [-1], [8, 2]])
def test_free_still_raises_on_the_bad_page(bad: list[int]) -> None:
    manager = _manager(1)
    manager.allocate(10)
    manager.free([2])
    with pytest.raises(RuntimeError, match="double free"):
        manager.free(bad)


def _common_len_by_pages(page_size: int, key: list[int], ids: list[int], pos: int) -> int:
    n, limit = 0, min(len(key), len(ids) - pos)
    while n + page_size <= limit and key[n : n + page_size] == ids[pos + n : pos + n + page_size]:
        n += page_size
    return n


@pytest.mark.parametrize("page_size", [1, 3])
def test_common_len_equals_comparing_page_by_page(page_size: int) -> None:
    rng = random.Random(page_size)
    cache = RadixPrefixCache(page_size)
    for _ in range(500):
        key = [rng.randint(0, 3) for _ in range(rng.randint(1, 12) * page_size)]
        ids = [rng.randint(0, 3) for _ in range(rng.randint(0, 5))] + key[: rng.randint(0, 40)]
        ids += [rng.randint(0, 3) for _ in range(rng.randint(0, 5))]
        pos = rng.randint(0, len(ids))
        want = _common_len_by_pages(page_size, key, ids, pos)
        assert cache._common_len(key, ids, pos) == want
        assert cache._common_len(key, tuple(ids), pos) == want


def test_append_host_equals_concatenating() -> None:
    prompt = torch.arange(5, dtype=torch.int32)
    req = Req(prompt, table_idx=0)
    want, views = prompt.clone(), []
    for token in range(100, 140):  # 跨过几次扩容
        views.append((req.input_ids, want))
        req.append_host(token if token % 2 else torch.tensor([token]))
        want = torch.cat([want, torch.tensor([token], dtype=torch.int32)])
        assert torch.equal(req.input_ids, want) and req.input_ids.dtype == torch.int32
        assert req.host_len == len(want)
    assert torch.equal(prompt, torch.arange(5, dtype=torch.int32))  # 调用方给的提示没被改
    assert all(torch.equal(seen, expected) for seen, expected in views)  # 早先的那一段都没变
    # 退回队列的请求（第 17 章）把 input_ids 交给一个新请求：两个都追加，互不干扰
    heir = Req(req.input_ids, table_idx=1)
    heir.append_host(7)
    req.append_host(8)
    assert heir.input_ids[-2:].tolist() == [139, 7] and req.input_ids[-2:].tolist() == [139, 8]
