"""第 11 章：重叠调度（结果晚一步处理）与中止——输出不变，每个请求的行和页恰好释放一次。"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
import torch

from minisgl.core import SamplingParams
from minisgl.llm import LLM
from minisgl.scheduler import AbortReq, ExitReq, LocalIO, PendingReq, Scheduler, SchedulerConfig
from minisgl.utils.device import pick_device

PROMPTS = [list(range(400 + 100 * i, 400 + 100 * i + n)) for i, n in enumerate((9, 30, 2, 17, 5))]

# 设备和包里的选法相同（MINISGL_DEVICE > cuda > mps > cpu）：CI 在 CPU 上跑，
# GPU 机器上同一组测试在 CUDA 上跑（流、事件、CUDA Graph）
DEVICE = str(pick_device())


def make_llm(model: Path, overlap: bool, **overrides: object) -> LLM:
    config: dict[str, object] = dict(
        device=DEVICE, dtype=torch.float32, num_pages=256, max_running_reqs=8, max_seq_len=128
    )
    config.update(overrides)
    llm = LLM(model, **config)
    llm.scheduler.overlap = overlap
    return llm


def submit(sched: Scheduler, uid: int, prompt: list[int], max_tokens: int = 8) -> None:
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    sched.add_request(PendingReq(uid, torch.tensor(prompt, dtype=torch.int32), params))


def run(sched: Scheduler) -> dict[int, list]:
    got: dict[int, list] = {}
    while sched.has_work:
        for out in sched.step():
            got.setdefault(out.uid, []).append((out.token, out.finish_reason))
        sched.check_integrity()
    return got


def test_env_switch_disables_overlap(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINISGL_DISABLE_OVERLAP_SCHEDULING", "1")
    llm = LLM(tiny_model, device=DEVICE, dtype=torch.float32, num_pages=64, max_seq_len=64)
    assert llm.scheduler.overlap is False
    llm.shutdown()
    monkeypatch.delenv("MINISGL_DISABLE_OVERLAP_SCHEDULING")
    llm = LLM(tiny_model, device=DEVICE, dtype=torch.float32, num_pages=64, max_seq_len=64)
    assert llm.scheduler.overlap is True
    llm.shutdown()


@pytest.mark.parametrize("cache_type", ["naive", "radix"])
def test_overlap_on_equals_off(tiny_model: Path, cache_type: str) -> None:
    """分块、停止符、前缀复用都在：两种循环的输出逐个相同。"""
    first = make_llm(tiny_model, overlap=False).generate(
        [PROMPTS[1]], SamplingParams(max_tokens=10, ignore_eos=True)
    )[0]
    eos = first.token_ids[4]  # 让请求 1 在第 5 个 token（或者更早出现同一个 token 时）停下
    prompts = PROMPTS + [PROMPTS[1][:20] + [1, 2, 3]]  # 最后一个和请求 1 共用前缀
    params = [SamplingParams(max_tokens=m) for m in (3, 10, 1, 7, 12, 6)]
    results = {}
    for overlap in (False, True):
        llm = make_llm(
            tiny_model, overlap, cache_type=cache_type, max_extend_tokens=16, eos_token_ids=(eos,)
        )
        outs = llm.generate(prompts, params)
        results[overlap] = [(o.token_ids, o.finish_reason) for o in outs]
        sched = llm.scheduler
        assert sched.in_flight is None and sched.cache.available_pages == 256
        sched.check_integrity()
        llm.shutdown()
    assert results[True] == results[False]
    stop_at = first.token_ids.index(eos) + 1
    assert results[True][1] == (first.token_ids[:stop_at], "stop")


def test_late_result_of_a_finished_request_is_discarded(tiny_model: Path) -> None:
    """第 N 步采到停止符时，第 N+1 步已经发出：那一步的 token 不输出，请求只释放一次。"""
    probe = make_llm(tiny_model, overlap=False)
    tokens = probe.generate([PROMPTS[0]], SamplingParams(max_tokens=6, ignore_eos=True))[0]
    probe.shutdown()
    llm = make_llm(tiny_model, overlap=True, eos_token_ids=(tokens.token_ids[2],))
    sched = llm.scheduler
    sched.add_request(PendingReq(0, torch.tensor(PROMPTS[0], dtype=torch.int32)))
    decode_steps = []
    outputs = []
    while sched.has_work:
        outputs += sched.step()
        decode_steps.append(sched.stats["decode_steps"])
        sched.check_integrity()
    assert [o.token for o in outputs] == tokens.token_ids[:3]
    assert outputs[-1].finish_reason == "stop"
    # 第 3 个 token 的结果处理时，第 4 个 token 的那一步已经算了：多算了一步，结果被丢掉
    assert sched.stats["decode_steps"] == 3
    assert sched.table.num_free == sched.table.num_rows
    llm.shutdown()


# "正在前向"和"最后一个 token 已发出、结果未处理"只在重叠调度下存在：不重叠时每一步都处理完了
CASES = [(o, w) for o in (False, True) for w in ("waiting", "chunked", "running")]
CASES += [(True, "in_flight"), (True, "finishing")]


@pytest.mark.parametrize(("overlap", "where"), CASES)
def test_abort_frees_exactly_once(tiny_model: Path, overlap: bool, where: str) -> None:
    llm = make_llm(tiny_model, overlap, max_extend_tokens=8, max_running_reqs=2)
    sched = llm.scheduler
    submit(sched, 0, PROMPTS[0], max_tokens=4)
    submit(sched, 1, PROMPTS[1], max_tokens=6)  # 30 个 token：预算 8，要分 4 块
    submit(sched, 2, PROMPTS[2], max_tokens=3)  # 只有 2 行：它要等
    outputs = []

    def step() -> None:
        outputs.extend(sched.step())
        sched.check_integrity()

    if where == "waiting":
        target = 2
    elif where == "chunked":
        step()
        assert sched.prefill_manager.chunked is not None
        target = sched.prefill_manager.chunked.uid
    elif where == "running":
        while sched.decode_manager.get(0) is None:
            step()
        target = 0
    elif where == "in_flight":
        while sched.in_flight is None or sched.in_flight.batch.is_prefill:
            step()
        target = sched.in_flight.batch.reqs[0].uid
    else:  # 最后一个 token 已经发出、结果还没处理时中止：只能释放一次（mini-sglang PR #111）
        while not any(r.uid == 0 and not r.can_decode for r in sched.live_reqs()):
            step()
        target = 0
    n_before = len(outputs)
    aborted = sched.abort_request(target)
    assert [(o.uid, o.finish_reason) for o in aborted] in ([(target, "abort")], [])
    assert sched.abort_request(target) == []  # 第二次中止什么也不做
    sched.check_integrity()
    while sched.has_work:
        step()
    assert sched.cache.available_pages == 256 and sched.table.num_free == 2
    # 每个请求恰好结束一次；被中止的那个以 abort 结束，之后没有任何输出
    ends = [(o.uid, o.finish_reason) for o in outputs + aborted if o.finished]
    assert sorted(u for u, _ in ends) == [0, 1, 2]
    if where == "finishing":  # 它已经不在任何队列里：中止什么也不做，由结果处理正常结束
        assert aborted == [] and (0, "length") in ends
    else:
        assert (target, "abort") in ends
        assert all(o.uid != target for o in outputs[n_before:])  # 晚到的结果也被丢掉
    llm.shutdown()


@pytest.mark.parametrize("seed", range(6))
def test_random_abort_timing_keeps_the_books_straight(tiny_model: Path, seed: int) -> None:
    rng = random.Random(seed)
    llm = make_llm(
        tiny_model, overlap=bool(seed % 2), max_extend_tokens=12, num_pages=60, page_size=2
    )
    sched = llm.scheduler
    uids = list(range(20))
    prompts = {u: [rng.randint(1, 4) for _ in range(rng.randint(1, 25))] for u in uids}
    finished: dict[int, str | None] = {}
    pending = list(uids)
    while pending or sched.has_work:
        for _ in range(rng.randint(0, 2)):
            if pending:
                u = pending.pop(0)
                submit(sched, u, prompts[u], max_tokens=rng.randint(1, 8))
        if rng.random() < 0.3:
            for out in sched.abort_request(rng.choice(uids)):
                finished[out.uid] = out.finish_reason
        for out in sched.step():
            if out.finished:
                assert out.uid not in finished  # 每个请求只结束一次
                finished[out.uid] = out.finish_reason
        sched.check_integrity()
    assert set(finished) == set(uids)
    assert sched.cache.available_pages == 60 and sched.table.num_free == sched.table.num_rows
    llm.shutdown()


def test_abort_command_through_the_io(tiny_model: Path) -> None:
    """在线服务的样子：另一个线程发请求、发中止；被中止的请求收到一个 abort 结束输出。"""
    io = LocalIO()
    config = SchedulerConfig(tiny_model, device=DEVICE, dtype=torch.float32, num_pages=128)
    sched = Scheduler(config, io)
    thread = threading.Thread(target=sched.run_forever, daemon=True)
    thread.start()
    long = SamplingParams(max_tokens=100, ignore_eos=True)
    io.submit(PendingReq(0, torch.tensor(PROMPTS[0], dtype=torch.int32), long))
    first = io.get(timeout=60)
    assert first.uid == 0 and not first.finished
    io.submit(AbortReq(0))
    while True:
        out = io.get(timeout=60)
        if out.finished:
            break
    assert (out.uid, out.finish_reason, out.token) == (0, "abort", None)
    io.submit(ExitReq())
    thread.join(timeout=60)
    assert not thread.is_alive()
    sched.check_integrity()
    assert sched.cache.available_pages == 128
    sched.shutdown()


@pytest.mark.parametrize("bs", [1, 2, 3, 4, 5, 7, 8])
def test_ints_to_device_keeps_every_part_16_byte_aligned(bs: int) -> None:
    """几段整数一次拷到设备，切回来的每一段都从 16 字节对齐的地址开始、内容不变：Triton 按
    指针是否对齐各编译一份 kernel，对齐随批大小变的话，服务中途会现编译。"""
    from minisgl.utils.device import ints_to_device

    parts = ([7] * bs, list(range(bs + 1)), [], [3, 1, 4][: bs % 3 + 1])
    got = ints_to_device(parts, DEVICE)
    assert [t.tolist() for t in got] == [list(p) for p in parts]
    assert all(t.dtype == torch.int32 and t.data_ptr() % 16 == 0 for t in got)
    assert len({t.untyped_storage().data_ptr() for t in got}) == 1  # 只拷了一次：同一块存储
