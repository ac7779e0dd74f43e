"""第 17 章：乐观接纳与退回。KV 不够时请求被退回队列、以后重算：什么都不丢，输出不变，
账目每一步都对。"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from minisgl.core import SamplingParams
from minisgl.llm import LLM
from minisgl.scheduler import PendingReq, Scheduler, SchedulerConfig
from minisgl.utils.device import pick_device

DEVICE = str(pick_device())
# 8 个请求，提示 5～20 个 token，各要生成 40 个：全部同时跑要 8 × (提示 + 40) ≈ 420 个 token 的 KV
PROMPTS = [[300 + 37 * i + j for j in range(5 + 2 * i)] for i in range(8)]
MAX_TOKENS = 40


def make_llm(model: Path, *, overlap: bool, **overrides: object) -> LLM:
    config: dict[str, object] = dict(
        device=DEVICE, dtype=torch.float32, max_running_reqs=8, max_seq_len=256, num_pages=512
    )
    config.update(overrides)
    llm = LLM(model, **config)
    llm.scheduler.overlap = overlap
    return llm


def submit(sched: Scheduler, uid: int, params: SamplingParams) -> None:
    sched.add_request(PendingReq(uid, torch.tensor(PROMPTS[uid], dtype=torch.int32), params))


def run(sched: Scheduler, params: SamplingParams) -> tuple[dict[int, list[int]], int]:
    """全部请求一起提交，一步步跑完，每一步之后核对账目。
    返回各请求的 token 和最多同时运行的请求数。"""
    for uid in range(len(PROMPTS)):
        submit(sched, uid, params)
    tokens: dict[int, list[int]] = {uid: [] for uid in range(len(PROMPTS))}
    finished: set[int] = set()
    peak = 0
    while sched.has_work:
        for out in sched.step():
            assert out.uid not in finished, "一个请求结束之后又有输出"
            if out.token is not None:
                tokens[out.uid].append(out.token)
            if out.finished:
                assert out.finish_reason == "length"
                assert out.prompt_tokens == len(PROMPTS[out.uid])  # 用量按原来的提示算
                assert out.completion_tokens == MAX_TOKENS
                finished.add(out.uid)
        sched.check_integrity()
        # _make_room_for_decode 的捷径靠这一条：运行中的请求下一步只写一个 token，页已经放得下
        # 它之前的全部 token，所以每个请求最多差一页
        for req in sched.decode_manager.running:
            assert req.device_len == req.cached_len + 1
            assert sched.cache.pages_missing(req, req.cached_len) == 0
        peak = max(peak, len(sched.decode_manager))
    assert finished == set(tokens)
    return tokens, peak


@pytest.fixture(scope="module")
def reference(tiny_model: Path) -> dict[int, list[int]]:
    """KV 充足（不会退回）时的贪心输出。"""
    llm = make_llm(tiny_model, overlap=False)
    got, _ = run(llm.scheduler, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert llm.scheduler.stats["retracted"] == 0
    llm.shutdown()
    return got


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize(("cache_type", "page_size"), [("radix", 1), ("naive", 4), ("radix", 4)])
def test_retracted_requests_finish_with_the_same_tokens(
    tiny_model: Path,
    reference: dict[int, list[int]],
    overlap: bool,
    cache_type: str,
    page_size: int,
) -> None:
    """池子只有 160 个 token：乐观接纳让 8 个请求一起跑，decode 中途缺页，最晚接纳的被退回、
    以后重算。每个请求的 token 和 KV 充足时逐个相同（贪心），用量不变，账目每一步都对。"""
    llm = make_llm(
        tiny_model,
        overlap=overlap,
        cache_type=cache_type,
        page_size=page_size,
        num_pages=160 // page_size,
        kv_headroom=4,
    )
    got, peak = run(llm.scheduler, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert got == reference
    assert llm.scheduler.stats["retracted"] > 0
    assert peak > 3  # 整段预留时最多 3 个（见下一个测试）
    cache = llm.scheduler.cache
    assert cache.available_pages == cache.num_pages
    llm.shutdown()


def test_full_reservation_never_retracts(tiny_model: Path, reference: dict[int, list[int]]) -> None:
    """``kv_headroom=None`` 是第 8 章的规则：按整段生成预留，永远不退回，代价是同时跑的请求少。"""
    llm = make_llm(tiny_model, overlap=True, num_pages=160, kv_headroom=None)
    got, peak = run(llm.scheduler, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert got == reference
    assert llm.scheduler.stats["retracted"] == 0
    assert peak <= 3  # 每个请求预留提示 + 40 个 token：160 个 token 的池子最多放下 3 个
    llm.shutdown()


def test_seeded_sampling_survives_retraction(tiny_model: Path) -> None:
    """带 seed 的随机采样：第 i 个位置的随机数只由 (seed, i) 决定（第 16 章），重算之后接着采到的
    token 和没被退回时一样。"""
    params = SamplingParams(
        temperature=1.0, top_p=0.9, max_tokens=MAX_TOKENS, seed=7, ignore_eos=True
    )
    roomy = make_llm(tiny_model, overlap=True)
    expected, _ = run(roomy.scheduler, params)
    roomy.shutdown()
    tight = make_llm(tiny_model, overlap=True, num_pages=160, kv_headroom=0)
    got, _ = run(tight.scheduler, params)
    assert tight.scheduler.stats["retracted"] > 0
    assert got == expected
    tight.shutdown()


@pytest.mark.parametrize("seed", range(4))
def test_aborts_and_retractions_keep_the_books_straight(tiny_model: Path, seed: int) -> None:
    """退回和中止随机交错：被退回、还在排队的请求也能中止；每个请求恰好结束一次，最后一页不丢。"""
    rng = random.Random(seed)
    llm = make_llm(tiny_model, overlap=bool(seed % 2), num_pages=96, page_size=2, kv_headroom=2)
    sched = llm.scheduler
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    for uid in range(len(PROMPTS)):
        submit(sched, uid, params)
    finished: dict[int, str | None] = {}
    while sched.has_work:
        if rng.random() < 0.05:
            for out in sched.abort_request(rng.randrange(len(PROMPTS))):
                finished[out.uid] = out.finish_reason
        for out in sched.step():
            if out.finished:
                assert out.uid not in finished
                finished[out.uid] = out.finish_reason
        sched.check_integrity()
    assert set(finished) == set(range(len(PROMPTS)))
    assert sched.stats["retracted"] > 0
    assert sched.cache.available_pages == 96 and sched.table.num_free == sched.table.num_rows
    llm.shutdown()


def test_a_request_without_max_tokens_does_not_hold_the_whole_context(tiny_model: Path) -> None:
    """不写 max_tokens 的请求可以生成到上下文的上限。整段预留时它一个就占住整个池子，后来的
    请求全得等它生成完；乐观接纳时大家一起跑。"""
    for headroom, alone in ((None, True), (16, False)):
        config = SchedulerConfig(
            tiny_model, device=DEVICE, dtype=torch.float32, num_pages=256, max_seq_len=256,
            kv_headroom=headroom,
        )  # fmt: skip
        sched = Scheduler(config)
        endless = SamplingParams(max_tokens=10**6, ignore_eos=True)  # 截到上下文的上限
        submit(sched, 0, endless)
        submit(sched, 1, SamplingParams(max_tokens=4, ignore_eos=True))
        sched.step()
        sched.step()
        assert (sched.decode_manager.get(1) is None) == alone
        sched.shutdown()


def test_kv_headroom_is_checked() -> None:
    with pytest.raises(ValueError, match="kv_headroom"):
        SchedulerConfig("unused", kv_headroom=-1)


def test_metrics_count_retractions() -> None:
    """``/metrics`` 报告退回的次数：只增不减，是 counter。"""
    from minisgl.message import SchedulerStats
    from minisgl.server.metrics import Metrics

    m = Metrics()
    m.scheduler = SchedulerStats(1, 2, 64, 10, 4, 7, 8, retracted=3)
    lines = m.render().splitlines()
    assert "# TYPE minisgl_requests_retracted_total counter" in lines
    assert "minisgl_requests_retracted_total 3" in lines
    assert "# TYPE minisgl_running_requests gauge" in lines


def test_sampling_values_of_the_wrong_kind_are_rejected_up_front(tiny_model: Path) -> None:
    """离线的 ``LLM`` 不经过 HTTP 的请求模型：NaN、无穷、字符串、小数的 top_k 在准入时就是错误结果，
    不等到采样器里才出错——那样出错的那一步拿着请求的行和页，一个坏请求漏掉一份，行用完以后
    ``generate`` 再也等不到空行。这里坏请求比行数多，之后的好请求照样跑完，行和页都还了回来。"""
    llm = make_llm(tiny_model, overlap=False, max_running_reqs=2)
    bad = [
        SamplingParams(temperature=float("nan")),
        SamplingParams(temperature=float("inf")),
        SamplingParams(temperature="0.7"),  # type: ignore[arg-type]
        SamplingParams(top_k=2.5),  # type: ignore[arg-type]
        SamplingParams(max_tokens="5"),  # type: ignore[arg-type]
        SamplingParams(top_p=float("nan")),
    ]
    outs = llm.generate([PROMPTS[0]] * len(bad), bad)
    assert [o.finish_reason for o in outs] == ["error"] * len(bad)
    assert [o.error.split()[0] for o in outs if o.error] == [
        "temperature", "temperature", "temperature", "top_k", "max_tokens", "top_p"
    ]  # fmt: skip
    good = SamplingParams(temperature=0.7, top_k=5, max_tokens=4, ignore_eos=True, seed=1)
    assert [len(o.token_ids) for o in llm.generate(PROMPTS[:3], good)] == [4, 4, 4]
    sched = llm.scheduler
    assert sched.table.num_free == sched.table.num_rows
    llm.shutdown()
