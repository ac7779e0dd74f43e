"""第 9 章：分块预填充——块不超出预算、预算共用、没算完的请求不采样、输出与块大小无关。"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from minisgl.core import SamplingParams
from minisgl.kvcache import NaivePrefixCache
from minisgl.llm import LLM
from minisgl.scheduler import CacheManager, PendingReq, PrefillManager, ReqTable

# 开头各不相同：第 10 章起默认的前缀缓存在这里没有可复用的，测的只是分块
PROMPTS = [list(range(300 + 100 * i, 300 + 100 * i + n)) for i, n in enumerate((45, 13, 1, 30, 7))]


def test_first_request_over_budget_is_chunked() -> None:
    table = torch.zeros(4, 64, dtype=torch.int32)
    cache = CacheManager(64, 4, table, NaivePrefixCache(4))
    mgr = PrefillManager(cache, ReqTable(4), max_extend_tokens=10)
    ids = torch.arange(1, 26, dtype=torch.int32)
    mgr.add(PendingReq(0, ids, SamplingParams(max_tokens=2), output_len=2))
    mgr.add(PendingReq(1, ids[:3], SamplingParams(max_tokens=2), output_len=2))
    (req,) = mgr.schedule(reserved_pages=0)
    assert (req.uid, req.cached_len, req.device_len, req.is_chunked) == (0, 0, 10, True)
    assert len(req.pages) == 3  # 只拿了这一块要用的页（10 个 token，每页 4 个）
    assert mgr.chunked is req and len(mgr) == 2
    req.cached_len = req.device_len  # 调度器在前向之后这样推进
    (again,) = mgr.schedule(reserved_pages=0)
    assert again is req and (req.cached_len, req.device_len) == (10, 20)
    req.cached_len = req.device_len
    last, new = mgr.schedule(reserved_pages=0)  # 最后 5 个 token，剩下的预算给下一个请求
    assert last is req and (req.device_len, req.is_chunked) == (25, False)
    assert (new.uid, new.extend_len, new.is_chunked) == (1, 3, False)
    assert mgr.chunked is None and len(mgr) == 0


@pytest.mark.parametrize("budget", [1, 7, 16])
def test_chunks_respect_the_shared_budget_and_are_never_sampled(
    make_llm: Callable[..., LLM], tiny_model: Path, budget: int
) -> None:
    llm = make_llm(tiny_model, max_extend_tokens=budget, page_size=4)
    sched = llm.scheduler
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    for uid, p in enumerate(PROMPTS):
        sched.add_request(PendingReq(uid, torch.tensor(p, dtype=torch.int32), params))
    covered = {uid: [] for uid in range(len(PROMPTS))}  # 每个请求 prefill 的区间，按顺序
    outputs: dict[int, int] = {}
    while sched.has_work:
        batch = sched.schedule_next_batch()
        assert batch is not None
        if batch.is_prefill:
            assert batch.num_tokens <= budget
            spans = [(r.uid, r.cached_len, r.device_len) for r in batch.reqs]
            for uid, start, end in spans:
                covered[uid].append((start, end))
        done_prefill = {
            r.uid for r in batch.reqs if batch.is_prefill and r.device_len == len(r.input_ids)
        }
        for out in sched.process(sched.forward(batch)):
            # 第一个输出只能出现在提示的最后一块之后
            if out.uid not in outputs:
                assert out.uid in done_prefill
            outputs[out.uid] = outputs.get(out.uid, 0) + 1
        sched.check_integrity()
    for uid, spans in covered.items():
        # 各块首尾相接，正好覆盖整个提示
        assert spans[0][0] == 0 and spans[-1][1] == len(PROMPTS[uid])
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert outputs == {uid: 3 for uid in range(len(PROMPTS))}
    assert sched.cache.available_pages == sched.cache.num_pages
    llm.shutdown()


@pytest.mark.parametrize("page_size", [1, 4])
def test_output_is_independent_of_the_chunk_size(
    make_llm: Callable[..., LLM], tiny_model: Path, page_size: int
) -> None:
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    results = {}
    for budget in (8192, 64, 7, 1):
        llm = make_llm(tiny_model, max_extend_tokens=budget, page_size=page_size)
        results[budget] = [o.token_ids for o in llm.generate(PROMPTS, params)]
        stats = llm.scheduler.stats
        assert stats["prefill_tokens"] == sum(len(p) for p in PROMPTS)
        if budget == 1:
            assert stats["prefill_steps"] == sum(len(p) for p in PROMPTS)
        llm.shutdown()
    assert results[64] == results[8192]
    assert results[7] == results[8192]
    assert results[1] == results[8192]
