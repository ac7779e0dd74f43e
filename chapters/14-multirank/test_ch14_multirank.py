"""第 14 章：调度器接上 ZMQ；两个 rank（CPU、gloo）收到同样的消息、做同样的决策。"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from minisgl.core import SamplingParams
from minisgl.distributed import DistributedInfo, spawn_ranks
from minisgl.llm import LLM
from minisgl.message import (
    AbortBackendMsg,
    BaseBackendMsg,
    BaseTokenizerMsg,
    BatchBackendMsg,
    BatchTokenizerMsg,
    ExitMsg,
    UserMsg,
)
from minisgl.scheduler import (
    AbortReq,
    ExitReq,
    PendingReq,
    Scheduler,
    SchedulerConfig,
    ZmqIO,
    run_scheduler,
    to_commands,
)
from minisgl.utils import ZmqPullQueue, ZmqPushQueue

PROMPTS = [[9707, 11, 1879, 374], [785, 6722, 315, 9625, 374], [16, 11, 220, 17], [3838, 374]]
GREEDY = SamplingParams(max_tokens=6, ignore_eos=True)


def user(uid: int, prompt: list[int], params: SamplingParams = GREEDY) -> UserMsg:
    return UserMsg(
        uid=uid, input_ids=torch.tensor(prompt, dtype=torch.int32), sampling_params=params
    )


def make_config(model: Path, ipc_dir: str, **overrides: object) -> SchedulerConfig:
    config = SchedulerConfig(
        model,
        dtype=torch.float32,
        num_pages=256,
        max_seq_len=64,
        zmq_backend_addr=f"ipc://{ipc_dir}/b",
        zmq_detokenizer_addr=f"ipc://{ipc_dir}/d",
        zmq_broadcast_addr=f"ipc://{ipc_dir}/p",
    )
    return replace(config, **overrides)


def collect(
    detok: ZmqPullQueue,
    uids: set[int],
    errors: list[BaseException] | None = None,
    timeout_s: float = 240.0,
) -> dict[int, list[int]]:
    """收 DetokenizeMsg 直到 ``uids`` 都结束。

    调度器出了错就不会再回话：每 0.2 s 看一眼 ``errors``（起 rank 的线程把异常放在这里），
    最多等 ``timeout_s``，到时失败而不是一直等下去。
    """
    got: dict[int, list[int]] = {uid: [] for uid in uids}
    done: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while done != uids:
        while not detok.socket.poll(timeout=200):
            assert not errors, errors
            assert time.monotonic() < deadline, f"unfinished after {timeout_s} s: {uids - done}"
        batch = detok.get()
        assert isinstance(batch, BatchTokenizerMsg)
        for msg in batch.data:
            got[msg.uid].append(msg.next_token)
            if msg.finished:
                done.add(msg.uid)
    return got


def test_messages_become_commands() -> None:
    batch = BatchBackendMsg(data=[user(1, [5, 6]), AbortBackendMsg(uid=1), ExitMsg()])
    pending, abort, exit_ = to_commands(batch)
    assert isinstance(pending, PendingReq) and pending.uid == 1
    assert pending.input_ids.tolist() == [5, 6] and pending.sampling_params == GREEDY
    assert abort == AbortReq(1) and exit_ == ExitReq()


def test_single_rank_scheduler_over_zmq(tiny_model: Path, ipc_dir: str) -> None:
    """一个 rank：坏消息被丢掉而循环不退出；过长的输入立刻以 -1 结束（不会让客户端干等）。"""
    config = make_config(tiny_model, ipc_dir, device="cpu")
    detok = ZmqPullQueue(config.zmq_detokenizer_addr, True, BaseTokenizerMsg.decoder)
    push = ZmqPushQueue(config.zmq_backend_addr, False, BaseBackendMsg.encoder)
    sched = Scheduler(config)
    assert isinstance(sched.io, ZmqIO)
    thread = threading.Thread(target=sched.run_forever, daemon=True)
    thread.start()
    push.socket.send(b"\xc1 not msgpack")
    push.put(BatchBackendMsg(data=[user(0, PROMPTS[0]), user(1, list(range(1, 80)))]))
    got = collect(detok, {0, 1})
    assert len(got[0]) == 6 and got[1] == [-1]
    push.put(ExitMsg())
    thread.join(timeout=30)
    assert not thread.is_alive()
    sched.check_integrity()
    sched.shutdown()
    push.stop()
    detok.stop()
    assert os.listdir(ipc_dir) == []  # 绑定方关掉 socket 时删掉了 socket 文件


def test_broadcast_waits_for_subscribers(tiny_model: Path, ipc_dir: str) -> None:
    """rank 0 的 XPUB 等不到订阅者时超时报错，而不是从此一直等下去。"""
    config = make_config(tiny_model, ipc_dir, tp_info=DistributedInfo(0, 2))
    io = ZmqIO(config)
    with pytest.raises(TimeoutError):
        io.sync(timeout_s=0.3)
    io.close()


def test_two_ranks_agree_and_match_tp1(tiny_model: Path, ipc_dir: str) -> None:
    """两个 CPU rank：请求在它们启动之前就发出（不会卡住）；中途中止一个请求、混进一条坏消息；
    两个 rank 的调度摘要相同，生成的 token 和 tp=1 相同。"""
    config = make_config(tiny_model, ipc_dir)
    detok = ZmqPullQueue(config.zmq_detokenizer_addr, True, BaseTokenizerMsg.decoder)
    push = ZmqPushQueue(config.zmq_backend_addr, False, BaseBackendMsg.encoder)
    results: list = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.extend(spawn_ranks(run_scheduler, 2, (config,), timeout_s=240))
        except BaseException as e:  # 让主线程看到 rank 的错误，而不是一直等
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    for uid, prompt in enumerate(PROMPTS):
        push.put(user(uid, prompt))
    push.socket.send(b"garbage")
    push.put(user(9, PROMPTS[0], SamplingParams(max_tokens=50, ignore_eos=True)))
    push.put(AbortBackendMsg(uid=9))
    got = collect(detok, {0, 1, 2, 3, 9}, errors)
    push.put(ExitMsg())
    thread.join(timeout=240)
    assert not errors, errors
    assert not thread.is_alive()
    (digest0, steps0), (digest1, steps1) = results
    assert digest0 == digest1 and steps0 == steps1
    assert got[9][-1] == -1  # 以中止结束
    llm = LLM(tiny_model, device="cpu", dtype=torch.float32, num_pages=256, max_seq_len=64)
    single = [o.token_ids for o in llm.generate(PROMPTS, GREEDY)]
    llm.shutdown()
    assert [got[uid] for uid in range(len(PROMPTS))] == single
    push.stop()
    detok.stop()
