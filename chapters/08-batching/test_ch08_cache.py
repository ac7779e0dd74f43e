"""第 8 章：请求表、KV 页的账目、接纳新请求（不加载模型，只用 CPU 上的小页表）。"""

from __future__ import annotations

import pytest
import torch

from minisgl.core import SamplingParams
from minisgl.kvcache import NaivePrefixCache, create_prefix_cache
from minisgl.scheduler import CacheManager, DecodeManager, PendingReq, PrefillManager, ReqTable


def make_cache(num_pages: int, page_size: int, rows: int = 4, cols: int = 64) -> CacheManager:
    table = torch.full((rows, cols), -1, dtype=torch.int32)
    return CacheManager(num_pages, page_size, table, NaivePrefixCache(page_size))


def pending(uid: int, prompt_len: int, output_len: int) -> PendingReq:
    ids = torch.arange(1, prompt_len + 1, dtype=torch.int32)
    return PendingReq(uid, ids, SamplingParams(max_tokens=output_len), output_len=output_len)


def test_req_table_allocates_each_row_once_and_rejects_double_free() -> None:
    table = ReqTable(3)
    rows = [table.allocate() for _ in range(3)]
    assert rows == [0, 1, 2] and table.num_free == 0
    with pytest.raises(RuntimeError, match="no free row"):
        table.allocate()
    table.free(1)
    assert table.allocate() == 1
    table.free(2)
    with pytest.raises(RuntimeError, match="double free"):
        table.free(2)


@pytest.mark.parametrize("page_size", [1, 4])
def test_ensure_pages_writes_slots_into_the_row(page_size: int) -> None:
    cache = make_cache(num_pages=16, page_size=page_size)
    mgr = PrefillManager(cache, ReqTable(4), max_extend_tokens=100)
    mgr.add(pending(0, prompt_len=6, output_len=3))
    (req,) = mgr.schedule(reserved_pages=0)
    assert len(req.pages) == -(-6 // page_size)
    row = cache.page_table[req.table_idx]
    want = [p * page_size + i for p in req.pages for i in range(page_size)][:6]
    assert row[:6].tolist() == want
    # decode 一步一步地长：跨页时才多拿一页，拿到的页接着写进同一行
    for length in range(7, 10):
        cache.ensure_pages(req, length)
        assert len(req.pages) == -(-length // page_size)
    slots = row[:9].tolist()
    assert slots == [req.pages[i // page_size] * page_size + i % page_size for i in range(9)]
    assert len(set(slots)) == 9


def test_free_rejects_double_free_and_release_returns_every_page() -> None:
    cache = make_cache(num_pages=8, page_size=2)
    pages = cache.allocate(3)
    assert cache.num_free_pages == 5
    cache.free(pages[:1])
    with pytest.raises(RuntimeError, match="double free"):
        cache.free(pages[:1])
    with pytest.raises(RuntimeError, match="out of KV pages"):
        cache.allocate(100)
    mgr = PrefillManager(cache, ReqTable(4), max_extend_tokens=100)
    mgr.add(pending(0, prompt_len=5, output_len=1))
    (req,) = mgr.schedule(reserved_pages=0)
    cache.free(pages[1:])
    cache.check_integrity([req])
    cache.release_req(req)
    assert req.pages == [] and cache.num_free_pages == 8
    cache.check_integrity([])


def test_integrity_check_catches_leaks_and_double_ownership() -> None:
    cache = make_cache(num_pages=8, page_size=1)
    mgr = PrefillManager(cache, ReqTable(4), max_extend_tokens=100)
    mgr.add(pending(0, prompt_len=3, output_len=1))
    mgr.add(pending(1, prompt_len=2, output_len=1))
    a, b = mgr.schedule(reserved_pages=0)
    cache.check_integrity([a, b])
    with pytest.raises(RuntimeError, match="lost"):  # 忘了把 b 算进来：它的页"丢了"
        cache.check_integrity([a])
    b.pages.append(a.pages[0])  # 两个请求拿着同一页
    with pytest.raises(RuntimeError, match="also held by uid 0"):
        cache.check_integrity([a, b])
    b.pages.pop()
    cache._free.append(a.pages[0])  # 一页既空闲又被占用
    cache._free_set.add(a.pages[0])
    with pytest.raises(RuntimeError, match="also free"):
        cache.check_integrity([a, b])


@pytest.mark.until_chapter(8)  # 第 9 章起，超出预算的提示改为分块
def test_admission_respects_rows_token_budget_and_first_request_exception() -> None:
    cache = make_cache(num_pages=100, page_size=1)
    mgr = PrefillManager(cache, ReqTable(2), max_extend_tokens=10)
    for uid, n in enumerate([30, 4, 4, 4]):
        mgr.add(pending(uid, n, 1))
    # 第一个请求超出预算也要接纳（不分块时，否则它永远进不来），之后预算就用完了
    assert [r.uid for r in mgr.schedule(0)] == [0]
    assert [r.uid for r in mgr.schedule(0)] == [1]  # 只剩 1 行
    assert mgr.schedule(0) == [] and len(mgr) == 2


def test_admission_reserves_pages_for_the_whole_generation() -> None:
    cache = make_cache(num_pages=10, page_size=2)
    table, decode = ReqTable(4), DecodeManager()
    mgr = PrefillManager(cache, table, max_extend_tokens=100)
    for uid in range(3):
        mgr.add(pending(uid, prompt_len=4, output_len=4))  # 每个最终要 4 页
    first = mgr.schedule(decode.reserved_pages(cache))
    # 10 页只够两个请求生成到头；拿到的只是提示的 2 页，另外 2 页是预留
    assert [r.uid for r in first] == [0, 1]
    assert cache.num_free_pages == 6
    for r in first:
        r.complete_one()
    decode.update(first)
    assert decode.reserved_pages(cache) == 4  # 每个还要 4 - 2 页
    assert mgr.schedule(decode.reserved_pages(cache)) == []  # 6 空闲 - 4 预留 < 4：队头等着
    cache.release_req(first[0])
    table.free(first[0].table_idx)
    decode.remove(first[0])
    assert [r.uid for r in mgr.schedule(decode.reserved_pages(cache))] == [2]


def test_prefix_cache_registry() -> None:
    assert isinstance(create_prefix_cache("naive", 4), NaivePrefixCache)
    with pytest.raises(ValueError, match="supported: .*naive"):
        create_prefix_cache("nope", 4)
