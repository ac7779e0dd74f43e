"""第 8 章：调度器和离线 LLM，在内嵌的小模型上（float32，CPU）。"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from minisgl.core import SamplingParams
from minisgl.llm import LLM
from minisgl.scheduler import ExitReq, LocalIO, PendingReq, Scheduler, SchedulerConfig
from minisgl.utils.device import pick_device

PROMPTS = [
    [9707, 11, 1879, 374],
    [785, 6722, 315, 9625, 374, 12095, 13],
    [16, 11, 220, 17, 11, 220, 18],
    [3838, 374, 279, 7290, 315, 2272, 30, 362, 25, 576, 7290],
    [1],
]

# 设备和包里的选法相同（MINISGL_DEVICE > cuda > mps > cpu）：CI 在 CPU 上跑，
# GPU 机器上同一组测试在 CUDA 上跑（流、事件、CUDA Graph）
DEVICE = str(pick_device())


@pytest.mark.parametrize("page_size", [1, 4])
def test_batched_output_equals_sequential(
    make_llm: Callable[..., LLM], tiny_model: Path, page_size: int
) -> None:
    llm = make_llm(tiny_model, page_size=page_size)
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    together = llm.generate(PROMPTS, params)
    alone = [llm.generate([p], params)[0] for p in PROMPTS]
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]
    assert all(len(o.token_ids) == 12 and o.finish_reason == "length" for o in together)
    # 全部结束后所有页都可以再用（第 10 章起有些页留在前缀缓存里，但都可以淘汰）
    assert llm.scheduler.cache.available_pages == llm.scheduler.cache.num_pages
    llm.scheduler.check_integrity()
    llm.shutdown()


def test_continuous_batching_matches_greedy_generate(
    make_llm: Callable[..., LLM], tiny_model: Path
) -> None:
    """请求在中途加入（批次成员一直在变）也不影响各自的结果：和第 5 章的贪心生成逐个相同。"""
    from minisgl.models import generate_in_new_context

    llm = make_llm(tiny_model)
    sched = llm.scheduler
    model = sched.engine.model
    arrivals = {0: [0, 1], 2: [2], 3: [3, 4]}  # 第几步之前到达哪些请求
    tokens: dict[int, list[int]] = {i: [] for i in range(len(PROMPTS))}
    step = 0
    while step in arrivals or sched.has_work:
        for uid in arrivals.get(step, []):
            ids = torch.tensor(PROMPTS[uid], dtype=torch.int32)
            sched.add_request(PendingReq(uid, ids, SamplingParams(max_tokens=6, ignore_eos=True)))
        for out in sched.step():
            tokens[out.uid].append(out.token)
        sched.check_integrity()
        step += 1
    llm.shutdown()
    # 参照：第 5 章的静态循环，同一个模型，自己建一个刚好够用的上下文
    want = generate_in_new_context(model, PROMPTS, 6).token_ids
    assert [tokens[uid] for uid in range(len(PROMPTS))] == want


def test_eos_stops_unless_ignore_eos(make_llm: Callable[..., LLM], tiny_model: Path) -> None:
    llm = make_llm(tiny_model)
    first = llm.generate([PROMPTS[1]], SamplingParams(max_tokens=10, ignore_eos=True))[0]
    llm.shutdown()
    stop = first.token_ids[3]
    llm = make_llm(tiny_model, eos_token_ids=(stop,))
    out = llm.generate([PROMPTS[1]], SamplingParams(max_tokens=10))[0]
    assert out.token_ids == first.token_ids[: first.token_ids.index(stop) + 1]
    assert out.finish_reason == "stop"
    out = llm.generate([PROMPTS[1]], SamplingParams(max_tokens=10, ignore_eos=True))[0]
    assert out.token_ids == first.token_ids and out.finish_reason == "length"
    llm.shutdown()


def test_kv_exhaustion_makes_requests_wait_and_all_finish(
    make_llm: Callable[..., LLM], tiny_model: Path
) -> None:
    # 12 页 × 4 = 48 个 token；每个请求 11 + 10 = 21 个 token，要 6 页：同时最多 2 个
    llm = make_llm(tiny_model, page_size=4, num_pages=12)
    sched = llm.scheduler
    params = SamplingParams(max_tokens=10, ignore_eos=True)
    for uid in range(5):  # 开头各不相同：第 10 章的前缀缓存也没有可以共用的
        ids = torch.tensor([uid + 1, *PROMPTS[3][1:]], dtype=torch.int32)
        sched.add_request(PendingReq(uid, ids, params))
    counts = {uid: 0 for uid in range(5)}
    reasons: dict[int, str | None] = {}
    most = 0
    while sched.has_work:
        for out in sched.step():
            counts[out.uid] += 1
            if out.finished:
                reasons[out.uid] = out.finish_reason
        most = max(most, len(sched.decode_manager))
        sched.check_integrity()
    assert most == 2
    assert counts == {uid: 10 for uid in range(5)}
    assert reasons == {uid: "length" for uid in range(5)}
    assert sched.cache.available_pages == 12
    llm.shutdown()


def test_bad_requests_come_back_as_errors(make_llm: Callable[..., LLM], tiny_model: Path) -> None:
    llm = make_llm(tiny_model, max_seq_len=32, num_pages=64)
    outs = llm.generate(
        [list(range(1, 40)), [], PROMPTS[0], PROMPTS[0], PROMPTS[0]],
        [
            SamplingParams(),
            SamplingParams(),
            SamplingParams(max_tokens=0),
            SamplingParams(top_p=0.0, temperature=1.0),
            SamplingParams(max_tokens=3),
        ],
    )
    assert [o.finish_reason for o in outs] == ["error", "error", "error", "error", "length"]
    assert "maximum context length is 32" in (outs[0].error or "")
    assert "empty" in (outs[1].error or "") and "max_tokens" in (outs[2].error or "")
    assert "top_p" in (outs[3].error or "")
    assert [len(o.token_ids) for o in outs] == [0, 0, 0, 0, 3]
    # 词表之外的 token id、二维的输入：同样是错误结果，不占行、不占页，进程也不会崩
    sched = llm.scheduler
    for uid, ids in enumerate([torch.tensor([1, 10**7]), torch.tensor([-1]), torch.ones(2, 3)]):
        out = sched.add_request(PendingReq(100 + uid, ids.to(torch.int32)))
        assert out is not None and out.finish_reason == "error" and out.token is None
    assert "token ids must be in [0, 151936)" in (
        sched.add_request(PendingReq(200, torch.tensor([5, 151936], dtype=torch.int32))).error or ""
    )
    assert not sched.has_work and sched.table.num_free == sched.table.num_rows
    # max_tokens 超过上下文时按上下文截断：4 个提示 token + 28 = 32
    long = llm.generate([PROMPTS[0]], SamplingParams(max_tokens=1000, ignore_eos=True))[0]
    assert len(long.token_ids) == 28 and long.finish_reason == "length"
    llm.shutdown()


def test_a_bad_prompt_leaves_nothing_queued(make_llm: Callable[..., LLM], tiny_model: Path) -> None:
    """类型不对的提示在放进调度器之前就报错：不会把前面的提示留在等待队列里，之后的调用照常。
    一个字符串（而不是提示的列表）也报错，不会被拆成一个字符一个提示。"""
    llm = make_llm(tiny_model)
    with pytest.raises(TypeError):
        llm.generate([PROMPTS[0], None])  # type: ignore[list-item]
    assert not llm.scheduler.has_work
    with pytest.raises(TypeError, match="wrap a single prompt"):
        llm.generate("hello")
    # 小数的 token id 不能悄悄截成整数，超出 int32 的也不能转换时绕回一个合法的 id
    for bad in ([1.0, 2.7], [True, 5], [[1, 2]]):
        with pytest.raises(TypeError, match="flat list of int"):
            llm.generate([PROMPTS[0], bad])  # type: ignore[list-item]
    for bad in ([2**32 + 5], [-(2**31) - 1], [2**70]):
        with pytest.raises(ValueError, match="int32"):
            llm.generate([PROMPTS[0], bad])
    assert not llm.scheduler.has_work
    outs = llm.generate([PROMPTS[0]], SamplingParams(max_tokens=3, ignore_eos=True))
    assert [len(o.token_ids) for o in outs] == [3]
    assert llm.scheduler.table.num_free == llm.scheduler.table.num_rows


def test_int_like_prompts_give_the_same_tokens(
    make_llm: Callable[..., LLM], tiny_model: Path
) -> None:
    """一列 Python 整数走快的那条路（numpy 一次转完），numpy 的整数、张量拆成的元素走 torch 推断的
    那条路：同一个提示，生成的 token 一样。"""
    llm = make_llm(tiny_model)
    ids = PROMPTS[1]
    forms = [ids, list(np.array(ids)), list(torch.tensor(ids))]
    outs = llm.generate(forms, SamplingParams(max_tokens=4, ignore_eos=True))
    assert outs[0].prompt_ids == ids
    assert len({tuple(o.token_ids) for o in outs}) == 1 and len(outs[0].token_ids) == 4
    llm.shutdown()


def test_generate_after_shutdown_says_so(make_llm: Callable[..., LLM], tiny_model: Path) -> None:
    llm = make_llm(tiny_model)
    llm.shutdown()
    llm.shutdown()  # 第二次什么也不做
    with pytest.raises(RuntimeError, match="has been shut down"):
        llm.generate([PROMPTS[0]])


def test_text_prompts_and_seeded_sampling(make_llm: Callable[..., LLM], tiny_model: Path) -> None:
    params = [SamplingParams(temperature=1.0, top_k=50, max_tokens=8, ignore_eos=True)] * 2
    params.append(SamplingParams(max_tokens=8, ignore_eos=True))
    runs = []
    for _ in range(2):
        llm = make_llm(tiny_model, seed=7)
        runs.append(llm.generate(["Hello", "北京是", "1, 2, 3"], params))
        llm.shutdown()
    assert [o.token_ids for o in runs[0]] == [o.token_ids for o in runs[1]]
    assert runs[0][0].text and isinstance(runs[0][1].text, str)


def test_run_forever_serves_requests_from_another_thread(tiny_model: Path) -> None:
    io = LocalIO()
    config = SchedulerConfig(
        tiny_model, device=DEVICE, dtype=torch.float32, num_pages=128, max_seq_len=64
    )
    sched = Scheduler(config, io)
    thread = threading.Thread(target=sched.run_forever, daemon=True)
    thread.start()
    params = SamplingParams(max_tokens=5, ignore_eos=True)
    for uid, prompt in enumerate(PROMPTS[:3]):
        io.submit(PendingReq(uid, torch.tensor(prompt, dtype=torch.int32), params))
    io.submit(PendingReq(9, torch.tensor([], dtype=torch.int32), params))
    got: dict[int, list[int | None]] = {}
    finished = set()
    while len(finished) < 4:
        out = io.get(timeout=60)
        got.setdefault(out.uid, []).append(out.token)
        if out.finished:
            finished.add(out.uid)
    io.submit(ExitReq())
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert got[9] == [None] and all(len(got[uid]) == 5 for uid in range(3))
    sched.check_integrity()
    sched.shutdown()
