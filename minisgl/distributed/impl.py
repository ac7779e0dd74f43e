"""张量并行的通信：``all_reduce`` 与 ``all_gather``。

张量并行（TP）时每个 rank 是一个进程，只持有每个权重矩阵的一片。大多数层各算各的，
只有两处需要交换数据：

- 行并行的线性层、词表并行的 embedding：每个 rank 算出一个**部分和**，``all_reduce`` 把
  所有 rank 的部分和加起来，每个 rank 都拿到完整的结果；
- LM head：每个 rank 算出自己那段词表的 logits，``all_gather`` 把各段按 rank 顺序拼起来。

tp=1 时两者都是恒等函数，单卡推理不需要初始化任何进程组。tp>1 时走 ``torch.distributed``
的默认进程组：GPU 上用 NCCL，CPU 上用 gloo——第 6 章用两个 CPU 进程跑通张量并行，靠的就是后者。
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .info import DistributedInfo, get_tp_info

__all__ = ["DistributedCommunicator"]


class DistributedCommunicator:
    """一个需要通信的层持有一个。建的时候记下 TP 信息，之后的调用都以它为准。

    为什么在构造时记下、而不是每次调用时再查：层的权重形状是按构造时的 TP 信息切的，
    通信必须和形状一致。如果中途有人改了全局 TP 信息，宁可在这里报错，也不要算出错的数。
    """

    def __init__(self, info: DistributedInfo | None = None) -> None:
        self.info = info if info is not None else get_tp_info()

    @property
    def size(self) -> int:
        return self.info.size

    def _check_group(self) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                f"tensor parallel size is {self.size} but torch.distributed is not initialized; "
                "call torch.distributed.init_process_group first"
            )
        world = dist.get_world_size()
        if world != self.size or dist.get_rank() != self.info.rank:
            raise RuntimeError(
                f"tp info (rank {self.info.rank} of {self.size}) does not match the process group "
                f"(rank {dist.get_rank()} of {world})"
            )

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """所有 rank 的 ``x`` 逐元素相加。**原地**进行：返回的就是 ``x`` 本身。"""
        if self.size == 1:
            return x
        self._check_group()
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x

    def all_gather(self, x: torch.Tensor, dim: int = -1) -> torch.Tensor:
        """把所有 rank 的 ``x`` 沿 ``dim`` 按 rank 顺序拼接：形状 ``(…, n, …) -> (…, n * tp, …)``。

        各 rank 的 ``x`` 形状必须相同。返回新张量，``x`` 不变。
        """
        if self.size == 1:
            return x
        self._check_group()
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.size)]
        dist.all_gather(parts, x)
        return torch.cat(parts, dim=dim)


# >> ch06
# ---------------------------------------------------------------- 进程组与启动 rank（第 6 章）

import ctypes
import importlib
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Sequence

from .info import reset_tp_info, set_tp_info

__all__ += ["destroy_distributed", "init_distributed", "spawn_ranks"]


def init_distributed(
    rank: int,
    size: int,
    *,
    init_method: str,
    device: torch.device | str = "cpu",
    backend: str | None = None,
    timeout_s: float = 60.0,
) -> DistributedInfo:
    """本进程作为第 ``rank`` 个（共 ``size`` 个）加入张量并行：设置 TP 信息，建默认进程组。

    - ``init_method``：各 rank 怎样找到彼此。同一台机器上最省事的是一个共享文件
      ``"file:///tmp/某个文件夹/store"``——不用找空闲端口，也就不会和别的程序抢端口；
      跨机器时用 ``"tcp://主节点地址:端口"``。
    - ``backend``：默认 CUDA 上用 NCCL、其余用 gloo。NCCL 只在 GPU 之间通信，每个 rank 要有
      自己的一块 GPU；gloo 在 CPU 张量上工作，没有 GPU 也能跑张量并行。
    - ``timeout_s``：一次集合通信最多等多久。某个 rank 崩了，其余的 rank 会卡在 all_reduce 里
      等它；到点就报错退出，而不是一直挂着（gloo 的默认值是 30 分钟）。

    ``size == 1`` 时只设置 TP 信息、不建进程组：tp=1 时通信器是恒等函数，用不到它。
    """
    device = torch.device(device)
    backend = backend or ("nccl" if device.type == "cuda" else "gloo")
    if backend == "nccl" and device.type != "cuda":
        raise ValueError(f"the NCCL backend needs a CUDA device, got {device}")
    if size > 1 and dist.is_initialized():
        raise RuntimeError(
            "torch.distributed is already initialized in this process; "
            "call destroy_distributed() first"
        )
    info = set_tp_info(rank, size)
    if size == 1:
        return info
    try:
        if device.type == "cuda":
            # NCCL 在"当前设备"上建通信器：不设的话所有 rank 都挤在 cuda:0 上
            torch.cuda.set_device(device.index if device.index is not None else rank)
        dist.init_process_group(
            backend,
            init_method=init_method,
            rank=rank,
            world_size=size,
            timeout=timedelta(seconds=timeout_s),
        )
    except BaseException:
        reset_tp_info()  # 没加入进程组，就不要留下"我是 tp=2 的 rank 0"的假信息
        raise
    return info


def destroy_distributed() -> None:
    """离开进程组、清掉 TP 信息。没有初始化过也可以调用。"""
    # >> ch14
    global _cpu_group
    _cpu_group = None
    # << ch14
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    reset_tp_info()


# 每个 rank 是一个全新的解释器：先把父进程的 sys.path 接过来，再进入 _rank_main
_RANK_ENTRY = (
    "import json, os, sys; sys.path[:0] = json.loads(os.environ['MINISGL_RANK_SYS_PATH']); "
    "from minisgl.distributed.impl import _rank_main; _rank_main(sys.argv[1], int(sys.argv[2]))"
)


def spawn_ranks(
    fn: Callable[..., Any],
    size: int,
    args: Sequence[Any] = (),
    *,
    device: str = "cpu",
    timeout_s: float = 120.0,
) -> list[Any]:
    """起 ``size`` 个进程，每个进程运行一次 ``fn(*args)``，按 rank 顺序返回它们的返回值。

    每个进程先 ``init_distributed``（各 rank 通过一个临时文件夹里的文件找到彼此），所以在
    ``fn`` 里 ``get_tp_info()`` 就是本 rank，``pick_device()`` 就是本 rank 的设备：
    ``device="cpu"`` 时都在 CPU 上（gloo），``device="cuda"`` 时第 r 个 rank 用 ``cuda:r``（NCCL）。

    ``fn`` 必须能按"模块.名字"导入——新进程是全新的 Python 解释器，只能这样找到它；参数和
    返回值用 pickle 传递（返回 CPU 上的张量）。

    为什么不用 ``torch.multiprocessing.spawn``：它的子进程会把父进程的主脚本重新执行一遍
    （本书的 main 是 notebook 式的脚本，顶层代码会在每个 rank 里再跑一遍），在 notebook 里又
    找不到定义在格子里的函数。这里每个 rank 就是一条普通的 ``python -c`` 命令，和 torchrun
    一样，父进程自己管它们的死活：

    - 任何一个 rank 出错，立刻杀掉其余的 rank（它们多半正卡在等它的 all_reduce 里），
      把出错 rank 的 traceback 放进 ``RuntimeError``；
    - 超过 ``timeout_s`` 还没全部结束，全部杀掉，抛 ``TimeoutError``；
    - 父进程自己被杀掉时，子进程也跟着退出（Linux 上由内核发信号），不会留下孤儿进程。
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda" and torch.cuda.device_count() < size:
        raise RuntimeError(
            f"{size} ranks on CUDA need {size} GPUs, but {torch.cuda.device_count()} are visible"
        )
    module, name = fn.__module__, fn.__qualname__
    if module == "__main__" or "<locals>" in name:
        raise ValueError(
            f"{name} is not importable by name from a new process: define it at the top level "
            "of a module (not in __main__, a notebook cell or another function)"
        )
    with tempfile.TemporaryDirectory(prefix="minisgl-ranks-") as tmp:
        folder = Path(tmp)
        job = {
            "module": module,
            "name": name,
            "args": tuple(args),
            "size": size,
            "device": device,
            "timeout_s": timeout_s,
            "parent": os.getpid(),
        }
        (folder / "job.pkl").write_bytes(pickle.dumps(job))
        env = dict(os.environ)
        env["MINISGL_RANK_SYS_PATH"] = json.dumps([p or os.getcwd() for p in sys.path])
        if device == "cpu":  # 几个 rank 分 CPU 核：各自开满线程只会互相抢
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // size))
        if sys.platform.startswith("linux"):  # 都在本机：gloo 走回环网卡，不依赖主机名解析
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        procs = [
            subprocess.Popen([sys.executable, "-c", _RANK_ENTRY, str(folder), str(rank)], env=env)
            for rank in range(size)
        ]
        try:
            _wait_for_ranks(procs, folder, timeout_s)
        finally:  # 正常结束、出错、超时、Ctrl-C：都要确认每个子进程都已经退出并被回收
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for p in procs:
                p.wait()
        return [pickle.loads((folder / f"rank{r}.out").read_bytes()) for r in range(size)]


def _wait_for_ranks(procs: list[subprocess.Popen[bytes]], folder: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p in procs]
        if all(code == 0 for code in codes):
            return
        failed = {r: code for r, code in enumerate(codes) if code not in (None, 0)}
        if failed:
            # 最早写下 traceback 的那个 rank 通常是根源；其余的多半是"对方断开了连接"
            reports = sorted(folder.glob("rank*.err"), key=lambda p: p.stat().st_mtime)
            lines = [f"rank(s) {sorted(failed)} of {len(procs)} failed (exit codes {failed})"]
            lines += [f"--- {p.stem}:\n{p.read_text(encoding='utf-8').rstrip()}" for p in reports]
            raise RuntimeError("\n".join(lines))
        if time.monotonic() > deadline:
            running = [r for r, code in enumerate(codes) if code is None]
            raise TimeoutError(
                f"rank(s) {running} of {len(procs)} still running after {timeout_s:g} s; "
                "all ranks were killed (a rank may be waiting in a collective that another "
                "rank never entered)"
            )
        time.sleep(0.02)


def _rank_main(folder: str, rank: int) -> None:
    """``spawn_ranks`` 启动的进程从这里开始：加入进程组、运行 ``fn``、把结果写进文件。"""
    path = Path(folder)
    job = pickle.loads((path / "job.pkl").read_bytes())
    _exit_with_parent(job["parent"])
    device = torch.device("cuda", rank) if job["device"] == "cuda" else torch.device("cpu")
    os.environ["MINISGL_DEVICE"] = str(device)  # 本进程里 pick_device() 就是这个设备
    try:
        fn: Any = importlib.import_module(job["module"])
        for part in job["name"].split("."):
            fn = getattr(fn, part)
        init_distributed(
            rank,
            job["size"],
            init_method=f"file://{path / 'store'}",
            device=device,
            timeout_s=job["timeout_s"],
        )
        result = fn(*job["args"])
        if job["size"] > 1:
            # 等所有 rank 都算完再离开：先走的 rank 会关掉连接，而别的 rank 可能还在建立连接
            # （机器很忙时，gloo 会报 "Connection closed by peer"）
            dist.barrier()
        destroy_distributed()
        out = path / f"rank{rank}.out"
        out.with_suffix(".tmp").write_bytes(pickle.dumps(result))
        out.with_suffix(".tmp").rename(out)  # 先写临时文件再改名：父进程不会读到半个文件
    except BaseException:
        (path / f"rank{rank}.err").write_text(traceback.format_exc(), encoding="utf-8")
        sys.exit(1)


def _exit_with_parent(parent: int) -> None:
    """父进程一死，本进程立刻被内核杀掉（Linux 的 ``PR_SET_PDEATHSIG``），不会变成孤儿一直挂着。"""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # 设置之前父进程就已经没了
        os._exit(1)


# << ch06
# >> ch14
# ---------------------------------------------------------- 控制消息用的 CPU 进程组（第 14 章）

_cpu_group: Any = None

__all__ += ["cpu_group"]


def cpu_group() -> Any:
    """一个 gloo 进程组，专门在 rank 之间交换"控制"数据：这一步收了几条消息、KV 池开多少页。

    GPU 上默认进程组是 NCCL，它只管 GPU 上的张量；控制数据在主机上，量又小，走 gloo 最合适。
    第一次调用时创建（``new_group`` 是集合操作，所有 rank 要按同样的顺序调用它）。
    """
    global _cpu_group
    if not dist.is_initialized():
        raise RuntimeError("cpu_group() needs torch.distributed to be initialized (tp > 1)")
    if _cpu_group is None:
        _cpu_group = dist.new_group(backend="gloo")
    return _cpu_group


# << ch14
