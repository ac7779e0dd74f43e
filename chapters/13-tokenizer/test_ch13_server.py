"""第 13 章：tokenizer 进程——消息的分拣与转发，以及真实进程、真实 ipc socket 上的一来一回。"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch

import minisgl
from minisgl.core import SamplingParams
from minisgl.message import (
    AbortBackendMsg,
    AbortMsg,
    BaseBackendMsg,
    BaseFrontendMsg,
    BaseTokenizerMsg,
    BatchBackendMsg,
    BatchFrontendMsg,
    BatchTokenizerMsg,
    DetokenizeMsg,
    TokenizeMsg,
    UserMsg,
    UserReply,
)
from minisgl.tokenizer import TokenizerWorker, tokenize_worker
from minisgl.utils import ZmqPullQueue, ZmqPushQueue, load_tokenizer

CHAT = [{"role": "user", "content": "用一句话介绍北京。"}]

# 包含 minisgl 包的目录：子进程里把它放进 PYTHONPATH，确保导入的是同一份 minisgl（切片或完整包）
PACKAGE_PARENT = str(Path(minisgl.__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path) -> Any:
    return load_tokenizer(tiny_model)


def tokenize(uid: int, text: Any, max_tokens: int = 8) -> TokenizeMsg:
    return TokenizeMsg(uid=uid, text=text, sampling_params=SamplingParams(max_tokens=max_tokens))


# ---------------------------------------------------------------- 不开进程：一轮消息的处理


def test_worker_sorts_and_forwards_in_arrival_order(tokenizer: Any) -> None:
    worker = TokenizerWorker(tokenizer)
    hi = tokenizer.encode("Hi")[0]
    msgs = [
        tokenize(1, CHAT),
        DetokenizeMsg(0, hi, False),
        AbortMsg(1),  # 同一轮里先请求、后中止：转给调度器时先后不能颠倒
        tokenize(2, "从前有座山，", max_tokens=3),
        DetokenizeMsg(0, 151645, True),
    ]
    backend, frontend = worker.handle(msgs)
    assert [type(m).__name__ for m in backend] == ["UserMsg", "AbortBackendMsg", "UserMsg"]
    first, abort, second = backend
    assert isinstance(first, UserMsg) and isinstance(second, UserMsg)
    assert (first.uid, abort.uid, second.uid) == (1, 1, 2)  # type: ignore[attr-defined]
    assert first.input_ids.dtype == torch.int32
    assert tokenizer.decode(first.input_ids.tolist()).endswith("<|im_start|>assistant\n")
    assert second.input_ids.tolist() == tokenizer.encode("从前有座山，")
    assert second.sampling_params == SamplingParams(max_tokens=3)
    # 一条 DetokenizeMsg 一条 UserReply；停止符不变成文本
    assert frontend == [UserReply(0, "Hi", False), UserReply(0, "", True)]


def test_abort_forwards_and_drops_detokenize_state(tokenizer: Any) -> None:
    worker = TokenizerWorker(tokenizer)
    ids = tokenizer.encode("one two")
    worker.handle([DetokenizeMsg(3, ids[0], False), DetokenizeMsg(4, ids[0], False)])
    assert set(worker.detokenize_manager.states) == {3, 4}
    backend, frontend = worker.handle([AbortMsg(3)])
    assert backend == [AbortBackendMsg(3)] and frontend == []
    assert set(worker.detokenize_manager.states) == {4}
    # 调度器随后为被中止的请求回一条 -1 的结束消息：空的结束回复，不留状态
    _, frontend = worker.handle([DetokenizeMsg(3, -1, True), DetokenizeMsg(4, ids[1], True)])
    assert frontend == [UserReply(3, "", True), UserReply(4, " two", True)]
    assert len(worker.detokenize_manager) == 0


# ---------------------------------------------------------------- 真实的进程和 socket


def receive(queue: ZmqPullQueue[Any], n: int, timeout_s: float = 60.0) -> list[Any]:
    got: list[Any] = []
    while len(got) < n:
        assert queue.socket.poll(timeout=int(timeout_s * 1000)), f"got {len(got)} of {n}"
        msg = queue.get()
        got += msg.data if isinstance(msg, (BatchBackendMsg, BatchFrontendMsg)) else [msg]
    return got


def start_worker(ctx: Any, model: Path, ipc_dir: str, *, create: bool, tid: int) -> Any:
    ack = ctx.Queue()
    proc = ctx.Process(
        target=tokenize_worker,
        daemon=True,
        kwargs=dict(
            tokenizer_path=str(model),
            addr=f"ipc://{ipc_dir}/tok",
            create=create,
            backend_addr=f"ipc://{ipc_dir}/back",
            frontend_addr=f"ipc://{ipc_dir}/front",
            local_bs=4,
            ack_queue=ack,
            tokenizer_id=tid,
        ),
    )
    proc.start()
    assert ack.get(timeout=120) == f"tokenizer {tid} is ready"
    return proc


def stop_worker(proc: Any) -> None:
    proc.terminate()  # SIGTERM
    proc.join(timeout=30)
    # 还没退出：SIGABRT 让 faulthandler 打印它各线程卡在哪一行（测试命令给每个进程都打开了它）
    if proc.exitcode is None:
        os.kill(proc.pid, signal.SIGABRT)
        proc.join(timeout=10)
    assert proc.exitcode == 0  # 正常退出，不是被信号杀死（那样是 -15）
    assert not psutil.pid_exists(proc.pid)


def test_worker_process_round_trip(tiny_model: Path, tokenizer: Any, ipc_dir: str) -> None:
    """默认的共享进程：它 bind 自己的地址，API Server 和调度器都 connect 过来推消息。"""
    ctx = mp.get_context("spawn")
    back = ZmqPullQueue(f"ipc://{ipc_dir}/back", True, BaseBackendMsg.decoder)  # 调度器
    front = ZmqPullQueue(f"ipc://{ipc_dir}/front", True, BaseFrontendMsg.decoder)  # API Server
    proc = start_worker(ctx, tiny_model, ipc_dir, create=True, tid=0)
    assert sorted(os.listdir(ipc_dir)) == ["back", "front", "tok"]
    api = ZmqPushQueue(f"ipc://{ipc_dir}/tok", False, BaseTokenizerMsg.encoder)
    sched = ZmqPushQueue(f"ipc://{ipc_dir}/tok", False, BaseTokenizerMsg.encoder)

    api.socket.send(b"\xc1 not msgpack")  # 坏消息被丢掉，进程照常工作
    api.put(tokenize(0, CHAT))
    api.put(tokenize(1, "Hello"))
    got = {m.uid: m for m in receive(back, 2)}
    expected = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert got[0].input_ids.tolist() == tokenizer.encode(expected)
    assert got[1].input_ids.tolist() == tokenizer.encode("Hello")

    # 调度器一步的输出：两个请求交错，"好"被切成 3 个字节 token，打包成一条消息发来
    good = [tokenizer.convert_tokens_to_ids(c) for c in ["å", "¥", "½"]]  # b"\xe5\xa5\xbd"
    hi, world = tokenizer.encode("Hi world")
    steps = [(good[0], hi), (good[1], world), (good[2], 151645)]
    texts: dict[int, str] = {0: "", 1: ""}
    for k, (t0, t1) in enumerate(steps):
        last = k == len(steps) - 1
        sched.put(BatchTokenizerMsg([DetokenizeMsg(0, t0, last), DetokenizeMsg(1, t1, last)]))
        for r in receive(front, 2):
            assert "\ufffd" not in r.incremental_output and r.finished == last
            texts[r.uid] += r.incremental_output
    assert texts == {0: "好", 1: "Hi world"}

    api.put(AbortMsg(7))
    assert receive(back, 1) == [AbortBackendMsg(7)]

    stop_worker(proc)
    for q in (api, sched, back, front):
        q.stop()
    assert os.listdir(ipc_dir) == []  # 包括 tokenizer 进程 bind 的那个 socket 文件


def test_two_tokenizers_share_an_address(tiny_model: Path, ipc_dir: str) -> None:
    """N 个只分词的进程共用一个地址：API Server 一头 bind，N 个进程都 connect（create=False）。"""
    ctx = mp.get_context("spawn")
    back = ZmqPullQueue(f"ipc://{ipc_dir}/back", True, BaseBackendMsg.decoder)
    front = ZmqPullQueue(f"ipc://{ipc_dir}/front", True, BaseFrontendMsg.decoder)
    api = ZmqPushQueue(f"ipc://{ipc_dir}/tok", True, BaseTokenizerMsg.encoder)  # API Server bind
    procs = [start_worker(ctx, tiny_model, ipc_dir, create=False, tid=i) for i in range(2)]
    for uid in range(6):
        api.put(tokenize(uid, f"request {uid}"))
    assert sorted(m.uid for m in receive(back, 6)) == list(range(6))
    for proc in procs:
        stop_worker(proc)
    for q in (api, back, front):
        q.stop()
    assert os.listdir(ipc_dir) == []


# tokenizer 进程只分词、反分词：引擎、调度器、注意力后端都不该被导入。不查 triton：CUDA 版的
# torch 和 transformers 自己就可能导入它，那不是我们的代码拉进来的
HEAVY = ("minisgl.engine", "minisgl.scheduler", "minisgl.attention")


def run_in_fresh_interpreter(code: str, tiny_model: Path, ipc_dir: str) -> Any:
    """在新的解释器里运行 ``code``（参数是模型目录和 ipc 目录），返回 ``CompletedProcess``。"""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(tiny_model), ipc_dir],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_worker_process_imports_no_engine(tiny_model: Path, ipc_dir: str) -> None:
    """tokenizer 进程从启动到就绪导入了哪些模块：在新的解释器里真的运行一遍 ``tokenize_worker``。

    不只看 ``import minisgl.tokenizer``：主函数里还会导入别的东西（加载分词器、读停止符）。
    就绪时给自己发 SIGTERM，主函数照常退出，再看 ``sys.modules``。
    """
    code = textwrap.dedent(
        """
        import json, os, signal, sys

        from minisgl.tokenizer import tokenize_worker

        class ReadyThenStop:  # 代替启动器的 ack 队列：一就绪就让进程退出
            def put(self, msg):
                os.kill(os.getpid(), signal.SIGTERM)

        model, d = sys.argv[1:]
        tokenize_worker(
            tokenizer_path=model,
            addr=f"ipc://{d}/tok",
            create=True,
            backend_addr=f"ipc://{d}/back",
            frontend_addr=f"ipc://{d}/front",
            ack_queue=ReadyThenStop(),
        )
        print(json.dumps(sorted(sys.modules)))
        """
    )
    result = run_in_fresh_interpreter(code, tiny_model, ipc_dir)
    assert result.returncode == 0, result.stderr
    modules = json.loads(result.stdout.splitlines()[-1])
    assert "minisgl.tokenizer.server" in modules and "transformers" in modules  # 确实走到了就绪
    heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []


def test_sigterm_swallowed_while_loading_still_stops_the_worker(
    tiny_model: Path, ipc_dir: str
) -> None:
    """SIGTERM 的处理函数抛出的异常落在 ``__del__`` 里时被 Python 吞掉（只打印 "Exception
    ignored"）。在新的解释器里真的运行 ``tokenize_worker``：加载分词器的中途，在一个 ``__del__``
    里调用 SIGTERM 的处理函数，模拟信号正好在那里到达。进程不该报告就绪、不该停在等消息上，
    而是加载完就退出，退出码 0，bind 的 socket 文件也删掉了。"""
    code = textwrap.dedent(
        """
        import gc, signal, sys

        import minisgl.tokenizer.server as server

        real_load = server.load_tokenizer

        class SignalArrivesHere:
            def __del__(self):
                handler = signal.getsignal(signal.SIGTERM)
                handler(signal.SIGTERM, None)  # 抛出的 KeyboardInterrupt 在这里被吞掉

        def load_and_get_signalled(path):
            SignalArrivesHere()
            gc.collect()
            return real_load(path)

        class Ready:
            def put(self, msg):
                print("ready", flush=True)

        server.load_tokenizer = load_and_get_signalled
        model, d = sys.argv[1:]
        server.tokenize_worker(
            tokenizer_path=model, addr=f"ipc://{d}/tok", create=True,
            backend_addr=f"ipc://{d}/back", frontend_addr=f"ipc://{d}/front", ack_queue=Ready(),
        )
        print("exited", flush=True)
        """
    )
    result = run_in_fresh_interpreter(code, tiny_model, ipc_dir)
    assert result.returncode == 0, result.stderr
    assert "Exception ignored" in result.stderr  # 异常确实被吞掉了：测试模拟的是那种情形
    lines = result.stdout.splitlines()  # 日志也在 stdout 里
    assert "ready" not in lines and lines[-1] == "exited"  # 没有报告就绪，主函数正常返回
    assert os.listdir(ipc_dir) == []


def test_sigterm_swallowed_while_idle_still_stops_the_worker(
    tiny_model: Path, ipc_dir: str
) -> None:
    """同样的事落在空闲时：进程在等消息，处理函数的异常被吞掉，只剩下"收到过"的标志（测试就绪
    之后从另一个线程直接设上它，模拟这种情形）。进程不能一直堵在 ``recv`` 里：每隔
    ``IDLE_CHECK_MS`` 醒来看一次，几秒内正常退出。"""
    code = textwrap.dedent(
        """
        import sys, threading

        import minisgl.tokenizer.server as server

        stops = []

        class Recorded(server._StopOnSignal):
            def __init__(self):
                super().__init__()
                stops.append(self)

        class SwallowedWhenReady:
            def put(self, msg):
                threading.Timer(0.5, setattr, (stops[0], "received", True)).start()

        server._StopOnSignal = Recorded
        model, d = sys.argv[1:]
        server.tokenize_worker(
            tokenizer_path=model, addr=f"ipc://{d}/tok", create=True,
            backend_addr=f"ipc://{d}/back", frontend_addr=f"ipc://{d}/front",
            ack_queue=SwallowedWhenReady(),
        )
        print("exited", flush=True)
        """
    )
    result = run_in_fresh_interpreter(code, tiny_model, ipc_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "exited"
    assert os.listdir(ipc_dir) == []
