"""启动器：按正确的顺序拉起所有进程，等它们都就绪再开门；关门时一个不剩地收拾干净。

一个服务由这些进程组成（tp=2、默认一个 tokenizer 时共 4 个），左边是 ``ps`` 里看到的名字::

    minisgl::api_server       主进程：API Server（FastAPI + uvicorn）；交互模式是 minisgl::shell
      ├── minisgl::scheduler_0  rank 0：收请求、广播给其他 rank、发出新 token
      ├── minisgl::scheduler_1  rank 1：只收 rank 0 的广播
      └── minisgl::detokenizer  分词 + 反分词（--num-tokenizer N 时另有 N 个分词进程
                                minisgl::tokenizer_0 … minisgl::tokenizer_{N-1}）

日志和报错里用的是 ``multiprocessing`` 的进程名：``minisgl-TP0-scheduler``、
``minisgl-detokenizer``、``minisgl-tokenizer-0``。

启动：先占住 HTTP 端口、bind 前端的接收地址，再用 spawn 拉起子进程，等每个子进程往同一个
``multiprocessing.Queue`` 里放一条"就绪"，收齐了才开始服务。关闭（Ctrl-C、SIGTERM、shell 里的
/exit）：让调度器收到 ``ExitMsg`` 自己退出，其余子进程 terminate，最后删掉残留的 ipc 文件。
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing as mp
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Sequence

from setproctitle import setproctitle

from minisgl.distributed import DistributedInfo
from minisgl.scheduler import Scheduler
from minisgl.utils import init_logger

from .args import ServerArgs, parse_args

__all__ = [
    "BackendStartError",
    "BackgroundServer",
    "ServingScheduler",
    "launch_server",
    "shutdown_backend",
    "start_background_server",
    "start_backend",
]

logger = init_logger(__name__, "initializer")
kv_logger = init_logger(f"{__name__}.kv", "scheduler")  # 在调度器进程里打印


# >> ch17
import functools
import threading
from collections.abc import Callable
from multiprocessing import connection as mp_connection

from minisgl.utils import remove_stale_ipc_files

__all__ += ["BackendWatchdog"]
# << ch17
# >> ch16
from minisgl.scheduler.stats import StatsPublisher

# << ch16
# ---------------------------------------------------------------- 子进程


def _become_worker(title: str) -> None:
    """每个子进程一开始就调用，``title`` 是它在 ``ps`` 里的名字。

    - 改名：spawn 出来的子进程在 ``ps``、``top`` 里全是 ``python -c "from multiprocessing.spawn
      import spawn_main; ..." --multiprocessing-fork``，看不出哪个是调度器、占着显存的是哪个 rank。
      ``setproctitle`` 改写进程的命令行（Linux 上同时改内核里 15 字节的短名），运维一眼就能认出来；
    - 忽略 SIGINT：终端里的 Ctrl-C 会发给整个前台进程组。如果每个子进程都被各自的
      ``KeyboardInterrupt`` 打断，调度器可能正停在 rank 之间的集合通信里，一个退出、另一个就一直
      等下去；交给主进程按顺序关闭，先后是确定的。
    - 主进程一死（哪怕是被 SIGKILL），子进程也跟着被内核杀掉（Linux 的 ``PR_SET_PDEATHSIG``），
      不会变成孤儿一直占着内存和显存。
    """
    setproctitle(title)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


@dataclass(frozen=True)
class _StartFailure:
    """子进程里出的错，经就绪消息的队列交给启动器。"""

    process: str  # multiprocessing 的进程名，如 minisgl-TP0-scheduler
    error: str


@contextlib.contextmanager
def _failure_reported_to(ack_queue: Any) -> Iterator[None]:
    """就绪之前出的错（模型不在、显存不够……）先放进 ``ack_queue`` 再照常抛出：启动器的报错里
    就有原因，用户不用在几个子进程的 traceback 里找。"""
    try:
        yield
    except Exception as e:
        error = f"{type(e).__name__}: {e}"[:1000]  # 队列走管道：别让一条消息大到堵住它
        ack_queue.put(_StartFailure(mp.current_process().name, error))
        raise


class ServingScheduler(Scheduler):
    """服务里的调度器：每次从"有活"变成"没活"时，在日志里报一次 KV 池和请求表的账目。

    所有请求都结束（或被中止）之后，可用页应该回到总页数、请求表的行全部空闲；少了，就是有请求
    漏了释放。测试读这一行，确认客户端断开后资源真的还了回来。
    """

    busy: bool = False

    # >> ch16
    publisher: StatsPublisher | None = None  # rank 0 把账目推给 API Server（/metrics 用）

    def __init__(self, args: ServerArgs) -> None:
        super().__init__(args)
        if args.tp_info.is_primary() and args.zmq_frontend_addr is not None:
            self.publisher = StatsPublisher(args.zmq_frontend_addr)

    def shutdown(self) -> None:
        if self.publisher is not None:
            self.publisher.stop()
        super().shutdown()

    # << ch16
    def step(self) -> list[Any]:
        outputs = super().step()
        # >> ch16
        changed = self.has_work != self.busy  # 刚忙起来，或者刚闲下来
        # << ch16
        if self.has_work:
            self.busy = True
        elif self.busy:
            self.busy = False
            self.report_kv("idle")
        # >> ch16
        if self.publisher is not None:
            # 闲下来时一定报一次；刚忙起来也不限频地报：不到一个报账间隔就跑完的一批请求，
            # /metrics 上留着的才不会是开始之前那份"空闲"，让人以为它们已经跑完
            self.publisher.publish(self, force=changed or not self.has_work)
        # << ch16
        return outputs

    def report_kv(self, when: str) -> None:
        cache = self.cache
        kv_logger.info(  # 每个 rank 报自己的池子：张量并行时每个 rank 都要还回来
            f"{when}: KV pages available {cache.available_pages}/{cache.num_pages} "
            f"({cache.num_free_pages} free), free rows {self.table.num_free}/"
            f"{self.config.max_running_reqs}"
        )


def _run_scheduler(args: ServerArgs, ack_queue: Any) -> None:
    """一个 TP rank 的调度器进程。"""
    _become_worker(f"minisgl::scheduler_{args.tp_info.rank}")
    import torch

    from minisgl.utils import pick_device

    rank, size = args.tp_info.rank, args.tp_info.size
    if size > 1:
        device = pick_device(args.device)
        if device.type == "cuda" and device.index is None:  # 每个 rank 一块 GPU
            args = replace(args, device=f"cuda:{rank}")
        if device.type == "cpu":  # 几个 rank 分 CPU 核：各自开满线程只会互相抢
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // size))
        if sys.platform.startswith("linux"):  # 都在本机：gloo 走回环网卡，不依赖主机名解析
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with torch.inference_mode():
        with _failure_reported_to(ack_queue):
            scheduler = ServingScheduler(args)
        try:
            scheduler.sync_all_ranks()  # 所有 rank 都初始化完（包括广播的订阅）再开始
            scheduler.report_kv("ready")
            if args.tp_info.is_primary():
                # >> ch16
                if scheduler.publisher is not None:
                    scheduler.publisher.publish(scheduler, force=True)
                # << ch16
                ack_queue.put("Scheduler is ready")
            if args.silent_output:
                logging.disable(logging.INFO)
            # >> ch17
            if args.shell:  # 被拒绝的一问由 shell 自己说明原因，不再多一行警告插进对话里
                logging.disable(logging.WARNING)
            # << ch17
            scheduler.run_forever()  # 收到 ExitMsg 时返回
        finally:
            scheduler.shutdown()


def _run_tokenizer(title: str, **kwargs: Any) -> None:
    """tokenizer / detokenizer 进程：第 13 章的 ``tokenize_worker``，先做子进程的准备。"""
    _become_worker(title)
    from minisgl.tokenizer import tokenize_worker

    with _failure_reported_to(kwargs["ack_queue"]):
        tokenize_worker(**kwargs)


# ---------------------------------------------------------------- 启动与关闭


def start_backend(args: ServerArgs, ready_timeout: float | None = None) -> list[Any]:
    """启动所有后端进程：每个 TP rank 一个调度器，一个 detokenizer，若干 tokenizer。

    收齐 ``num_tokenizer + 2`` 条就绪消息才返回（调度器只有 rank 0 发，在所有 rank 同步之后）。
    等待期间有子进程退出，或者超过 ``ready_timeout`` 秒，就关掉已经起来的进程并报错——而不是
    在 ``ack_queue.get()`` 上永远等下去。
    """
    # spawn：启动一个全新的解释器。fork 会把父进程已经初始化的 CUDA 上下文、线程、锁、ZMQ
    # context 原样复制过去，这些在子进程里都不能安全使用。用 context 而不是 set_start_method：
    # 不改变整个进程的全局设置
    ctx = mp.get_context("spawn")
    ack_queue = ctx.Queue()
    procs: list[Any] = []
    world = args.tp_info.size
    for i in range(world):
        rank_args = replace(args, tp_info=DistributedInfo(i, world))
        procs.append(
            ctx.Process(
                target=_run_scheduler, args=(rank_args, ack_queue), name=f"minisgl-TP{i}-scheduler"
            )
        )
    common: dict[str, Any] = dict(
        tokenizer_path=str(args.model_path),
        backend_addr=args.zmq_backend_addr,
        frontend_addr=args.zmq_frontend_addr,
        local_bs=1,
        ack_queue=ack_queue,
    )
    # >> ch17
    common["max_seq_len"] = args.max_seq_len  # 显然太长的提示，分词之前就拒绝（第 17 章）
    # << ch17
    n = args.num_tokenizer
    detok = dict(common, addr=args.zmq_detokenizer_addr, create=True, tokenizer_id=n)
    procs.append(
        ctx.Process(
            target=_run_tokenizer,
            args=("minisgl::detokenizer",),
            kwargs=detok,
            name="minisgl-detokenizer",
        )
    )
    for i in range(n):
        tok = dict(
            common, addr=args.zmq_tokenizer_addr, create=args.tokenizer_create_addr, tokenizer_id=i
        )
        procs.append(
            ctx.Process(
                target=_run_tokenizer,
                args=(f"minisgl::tokenizer_{i}",),
                kwargs=tok,
                name=f"minisgl-tokenizer-{i}",
            )
        )
    try:
        for p in procs:
            p.start()
        _wait_for_acks(ack_queue, procs, n + 2, ready_timeout)
    except BaseException:  # 包括等待中的 Ctrl-C：已经起来的进程不能留下
        shutdown_backend(args, procs)
        raise
    return procs


class BackendStartError(RuntimeError):
    """有后端进程在就绪之前退出了。"""


def _wait_for_acks(ack_queue: Any, procs: list[Any], count: int, timeout: float | None) -> None:
    deadline = None if timeout is None else time.monotonic() + timeout
    got = 0
    causes: dict[str, str] = {}  # 进程名 → 它报上来的错
    while got < count:
        got += _take_messages(ack_queue, 0.5, causes)
        dead = [p for p in procs if p.exitcode is not None]
        if dead and got < count:
            # 子进程先放消息再退出：它的错这时一定已经在队列里了
            got += _take_messages(ack_queue, 0.1, causes)
            names = ", ".join(
                f"{p.name} (exit code {p.exitcode})"
                + (f": {causes[p.name]}" if p.name in causes else "")
                for p in dead
            )
            raise BackendStartError(f"backend process exited before it was ready: {names}")
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"only {got} of {count} backend processes ready after {timeout} s")


def _take_messages(ack_queue: Any, wait: float, causes: dict[str, str]) -> int:
    """最多等 ``wait`` 秒拿到一条消息，再把已经到了的都拿出来：就绪消息记进日志、返回条数，
    子进程报上来的错按进程名记进 ``causes``。"""
    got = 0
    try:
        msg = ack_queue.get(timeout=wait)
        while True:
            if isinstance(msg, _StartFailure):
                causes[msg.process] = msg.error
            else:
                logger.info(msg)
                got += 1
            msg = ack_queue.get_nowait()
    except queue.Empty:
        return got


def shutdown_backend(args: ServerArgs, procs: list[Any], timeout: float = 10.0) -> None:
    """关掉后端进程，删掉残留的 ipc 文件。可以在任何阶段调用（包括进程还没全部启动时）。"""
    from minisgl.message import BaseBackendMsg, ExitMsg
    from minisgl.utils import ZmqPushQueue

    schedulers = [p for p in procs if "scheduler" in p.name and p.is_alive()]
    if schedulers and args.zmq_backend_addr is not None:
        # 调度器自己退出：rank 0 把 ExitMsg 广播给其他 rank，各自走完 shutdown()、关掉 socket
        exit_queue = ZmqPushQueue(
            args.zmq_backend_addr, create=False, encoder=BaseBackendMsg.encoder
        )
        try:
            exit_queue.put(ExitMsg())
            deadline = time.monotonic() + timeout
            for p in schedulers:  # 先等它们收到，再关 socket：linger=0 会丢掉还没送出的消息
                p.join(max(0.0, deadline - time.monotonic()))
        finally:
            exit_queue.stop()
    for p in procs:  # tokenizer 没有退出消息；没能按时退出的调度器也一样
        if p.is_alive():
            p.terminate()
    for p in procs:
        if p.pid is None:  # 还没来得及 start()
            continue
        p.join(5.0)
        if p.is_alive():
            p.kill()
            p.join()
    # 被 terminate 的进程来不及删自己 bind 的 socket 文件，由启动器统一收尾
    for path in args.ipc_files:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


# >> ch17
class BackendWatchdog(threading.Thread):
    """主进程里的一个线程：盯着所有后端进程，哪一个意外退出（崩溃、被 OOM killer 杀掉、
    被人 ``kill -9``），就调用一次 ``on_failure(说明)``。

    被 SIGTERM、SIGINT 停下的（或者因此正常退出的 tokenizer）不算故障，调用的是
    ``on_stop(说明)``：这是有人要整个服务停下。systemd（默认的 ``KillMode=control-group``）、
    ``timeout`` 这些工具把 SIGTERM 发给整个进程组，子进程和主进程同时收到——子进程先死，
    不能当成崩溃报错、以非 0 的退出码结束。

    不靠轮询 ``is_alive()``：每个进程有一个 ``sentinel``（进程结束时变得可读的文件描述符），
    ``multiprocessing.connection.wait`` 同时等所有的 sentinel，进程一退出马上醒来。
    正常关闭之前先 ``stop()``：那时进程的退出是意料之中的。
    """

    STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(
        self,
        procs: list[Any],
        on_failure: Callable[[str], None],
        on_stop: Callable[[str], None],
    ) -> None:
        super().__init__(name="minisgl-watchdog", daemon=True)
        self.procs, self.on_failure, self.on_stop = procs, on_failure, on_stop
        self.stopping = threading.Event()
        self.failure: str | None = None

    def run(self) -> None:
        sentinels = {p.sentinel: p for p in self.procs}
        while not self.stopping.is_set():
            ready = mp_connection.wait(list(sentinels), timeout=0.2)
            if ready and not self.stopping.is_set():
                proc = sentinels[ready[0]]  # type: ignore[index]
                proc.join(1.0)  # 拿到退出码
                code = proc.exitcode
                if code == 0 or (code is not None and -code in self.STOP_SIGNALS):
                    reason = f"backend process {proc.name} was stopped (exit code {code})"
                    logger.warning(f"{reason}; shutting the server down")
                    self.on_stop(reason)
                    return
                self.failure = f"backend process {proc.name} exited unexpectedly"
                self.failure += f" (exit code {code})"
                logger.error(self.failure)
                self.on_failure(self.failure)
                return

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=5.0)


# << ch17
def _bind_http_socket(host: str, port: int) -> socket.socket:
    """先占住端口再加载模型：端口被占用时立刻报错，而不是等模型加载完。

    只 bind 不 listen：在 uvicorn 开始服务之前，连接会被直接拒绝，客户端据此知道"还没就绪"。
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise SystemExit(f"cannot listen on {host}:{port}: {e}") from None
    return sock


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(0)  # 和 Ctrl-C 一样走 finally 里的关闭流程


def launch_server(argv: Sequence[str] | None = None, *, shell: bool = False) -> None:
    """``python -m minisgl`` 的全部流程。``argv`` 默认是命令行参数。"""
    from .api_server import init_frontend

    args = parse_args(argv, shell=shell)
    setproctitle("minisgl::shell" if args.shell else "minisgl::api_server")  # ps 里的名字
    # >> ch17
    # 上一个被 SIGKILL 的服务留下的 socket 文件：它的主进程已经不在了，趁现在删掉
    for directory in sorted({os.path.dirname(path) for path in args.ipc_files}):
        for path in remove_stale_ipc_files(directory):
            logger.info(f"removed stale ipc socket file {path}")
    # << ch17
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    sock = None if args.shell else _bind_http_socket(args.host, args.port)
    state = init_frontend(args)  # bind 前端的接收地址：detokenizer 一起来就能连上
    procs: list[Any] = []
    # >> ch17
    watchdog: BackendWatchdog | None = None
    # << ch17
    try:
        procs = start_backend(args)
        if args.shell:
            from minisgl.shell import run_shell

            # >> ch17
            # shell 的主线程多半堵在 input() 或事件循环的等待里：给它发一个真的 SIGTERM，
            # 系统调用被打断，_exit_on_sigterm 让它走正常的关闭流程，而不是让用户一直等着
            main_thread = threading.main_thread().ident
            assert main_thread is not None

            def wake_main(_: str) -> None:
                signal.pthread_kill(main_thread, signal.SIGTERM)

            watchdog = BackendWatchdog(procs, wake_main, wake_main)
            watchdog.start()
            # << ch17
            run_shell(state)
        else:
            assert sock is not None
            from .api_server import run_http

            # 先 listen 再打印"就绪"：看到这一行之后连上来的客户端不会被拒绝，最多在队列里
            # 等 uvicorn 的事件循环转起来
            sock.listen(2048)
            host, port = sock.getsockname()[:2]
            # >> ch17
            watchdog = BackendWatchdog(
                procs,
                state.fail_from_thread,
                functools.partial(state.fail_from_thread, stopping=True),
            )
            watchdog.start()
            # << ch17
            logger.info(f"API server is ready on http://{host}:{port}")
            run_http(sock)
    except KeyboardInterrupt:
        pass
    except BackendStartError as e:  # 原因已经在 e 里：一行说清楚，不再多一段主进程的 traceback
        raise SystemExit(f"the server did not start: {e}") from None
    # >> ch17
    except SystemExit:  # SIGTERM；看门狗叫停 shell 时也是它：那时要以非 0 的退出码结束
        if watchdog is None or watchdog.failure is None:
            raise
    # << ch17
    finally:
        # 关闭流程不能再被第二次 Ctrl-C 打断到一半：每一步都有超时，很快就结束
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        logger.info("shutting down")
        # >> ch17
        if watchdog is not None:
            watchdog.stop()  # 接下来进程的退出都是意料之中的
        # << ch17
        state.shutdown()
        shutdown_backend(args, procs)
        if sock is not None:
            sock.close()
        logger.info("all processes exited")
    # >> ch17
    if watchdog is not None and watchdog.failure is not None:
        raise SystemExit(f"exiting because {watchdog.failure}")  # 退出码 1：让外面的监控知道
    # << ch17


# ---------------------------------------------------------------- 在后台运行服务
# 各章的 main、基准测试都像普通用户一样用服务：在后台的子进程里运行 ``python -m minisgl``。
# - 端口由内核挑一个空闲的，日志写进一个临时文件（出错时把最后一段带进异常）；
# - 服务在自己的会话（进程组）里：结束时能把它和它的子进程当成一组来检查、来收拾；
# - 就绪的标志是 ``/health`` 返回 200：启动器收齐所有子进程的"就绪"之后才开始监听端口；
# - 无论中途出了什么错（包括在 notebook 里中断），解释器退出时整组进程都会被杀掉。


@dataclass
class BackgroundServer:
    proc: subprocess.Popen[bytes]  # 主进程（API Server）；它的 pid 也是进程组号
    url: str  # http://127.0.0.1:端口
    log_path: str
    startup_s: float  # 从启动到就绪的秒数

    def log_text(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self, timeout: float = 60) -> int:
        """像按 Ctrl-C 一样给主进程发 SIGINT，等它按顺序关闭，返回退出码；超时就整组杀掉。"""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """整组 SIGKILL，删掉日志。可以调用多次（解释器退出时还会再调用一次）。"""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # 已经正常关掉了
            pass
        self.proc.wait()
        if os.path.exists(self.log_path):
            os.unlink(self.log_path)


def start_background_server(
    model: str, *args: str, name: str = "minisgl", timeout: float = 300
) -> BackgroundServer:
    """启动 ``python -m minisgl --model MODEL ARGS...``，等到就绪再返回。

    ``model`` 只有配置、没有权重（比如 ``models/qwen3-0.6b-shape``）时自动加 ``--dummy-weights``，
    按真实形状填随机权重。服务没起来（进程退出或超时）时抛 ``RuntimeError``，带着日志的最后一段。
    """
    import httpx

    from minisgl.engine import has_weight_files

    with socket.socket() as s:  # 让内核挑一个空闲端口
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fd, log_path = tempfile.mkstemp(prefix=f"{name}-", suffix=".log")
    cmd = [sys.executable, "-m", "minisgl", "--model", model, "--port", str(port), *args]
    if not has_weight_files(model):
        cmd.append("--dummy-weights")
    with os.fdopen(fd, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = BackgroundServer(proc, f"http://127.0.0.1:{port}", log_path, 0.0)
    atexit.register(server.kill)
    start = time.time()
    while True:
        if proc.poll() is not None or time.time() - start > timeout:
            tail = server.log_text()[-3000:]
            server.kill()
            raise RuntimeError(f"the server did not start:\n{tail}")
        try:
            if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    server.startup_s = time.time() - start
    return server
