"""第 10 章：radix 缓存接进调度器——输出和 naive 相同，共同的前缀只算一次，账目始终对得上。"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from minisgl.core import SamplingParams
from minisgl.llm import LLM
from minisgl.scheduler import PendingReq

SYSTEM = list(range(2000, 2040))  # 40 个 token 的"系统提示"
PROMPTS = [SYSTEM + [7, 8, 9], SYSTEM + [7, 8, 1, 2], SYSTEM + [5], [3, 4] + SYSTEM, SYSTEM[:9]]


def test_match_never_covers_the_whole_prompt(
    make_llm: Callable[..., LLM], tiny_model: Path
) -> None:
    llm = make_llm(tiny_model, cache_type="radix")
    params = SamplingParams(max_tokens=2, ignore_eos=True)
    llm.generate([SYSTEM], params)
    before = llm.scheduler.stats["prefill_tokens"]
    again = llm.generate([SYSTEM], params)[0]  # 整个提示都在缓存里，最后一个 token 仍要重算
    assert llm.scheduler.stats["prefill_tokens"] - before == 1
    assert again.token_ids == llm.generate([SYSTEM], params)[0].token_ids
    llm.shutdown()


@pytest.mark.parametrize("page_size", [1, 4])
def test_radix_output_equals_naive_and_prefills_less(
    make_llm: Callable[..., LLM], tiny_model: Path, page_size: int
) -> None:
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    outs, prefilled = {}, {}
    for cache_type in ("naive", "radix"):
        llm = make_llm(tiny_model, cache_type=cache_type, page_size=page_size)
        first = llm.generate(PROMPTS[:1], params)  # 先单独跑一个：它的前缀进缓存
        rest = llm.generate(PROMPTS[1:], params)  # 再一起跑其余的
        outs[cache_type] = [o.token_ids for o in first + rest]
        prefilled[cache_type] = llm.scheduler.stats["prefill_tokens"]
        llm.scheduler.check_integrity()
        llm.shutdown()
    assert outs["radix"] == outs["naive"]
    assert prefilled["naive"] == sum(len(p) for p in PROMPTS)
    # 后 4 个请求一起 prefill，只能复用第一个请求留下的前缀（按整页、且最后一个 token 要重算）：
    # SYSTEM+[7,8] 42 个（整页 40）、SYSTEM 40 个、SYSTEM[:8] 8 个
    saved = {1: 42 + 40 + 8, 4: 40 + 40 + 8}[page_size]
    assert prefilled["naive"] - prefilled["radix"] == saved


def test_shared_system_prompt_is_reported_as_cached(
    make_llm: Callable[..., LLM], tiny_model: Path
) -> None:
    llm = make_llm(tiny_model, cache_type="radix", page_size=4)
    sched = llm.scheduler
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    sched.add_request(PendingReq(0, torch.tensor(PROMPTS[0], dtype=torch.int32), params))
    while sched.has_work:
        sched.step()
    sched.add_request(PendingReq(1, torch.tensor(PROMPTS[1], dtype=torch.int32), params))
    batch = sched.schedule_next_batch()
    assert batch is not None and batch.is_prefill
    (req,) = batch.reqs
    # 共同的部分是 SYSTEM + [7, 8]（42 个 token），按整页只能复用 40 个
    assert req.cached_len == 40 and req.extend_len == len(PROMPTS[1]) - 40
    sched.process(sched.forward(batch))
    while sched.has_work:
        sched.step()
    sched.check_integrity()
    llm.shutdown()


def test_eviction_under_pressure_with_random_arrivals(
    make_llm: Callable[..., LLM], tiny_model: Path
) -> None:
    """页很少、请求很多、前缀常常相同：缓存一满就淘汰；每一步之后账目都对，全部请求都完成，
    输出与 naive 相同。"""
    rng = random.Random(0)
    heads = [[rng.randint(1, 3) for _ in range(rng.randint(1, 6))] for _ in range(24)]
    prompts = [head + list(range(50, 50 + rng.randint(0, 20))) for head in heads]
    params = SamplingParams(max_tokens=4, ignore_eos=True)
    results = {}
    for cache_type in ("naive", "radix"):
        llm = make_llm(
            tiny_model, cache_type=cache_type, page_size=2, num_pages=40, max_extend_tokens=16
        )
        sched = llm.scheduler
        got: dict[int, list[int]] = {uid: [] for uid in range(len(prompts))}
        arrivals = list(range(len(prompts)))
        while arrivals or sched.has_work:
            for _ in range(rng.randint(0, 3)):
                if arrivals:
                    uid = arrivals.pop(0)
                    ids = torch.tensor(prompts[uid], dtype=torch.int32)
                    sched.add_request(PendingReq(uid, ids, params))
            for out in sched.step():
                got[out.uid].append(out.token)
            sched.check_integrity()
        assert sched.cache.available_pages == 40
        results[cache_type] = got
        llm.shutdown()
    assert results["radix"] == results["naive"]
