"""设备：全书唯一知道 cuda / mps / cpu 区别的地方。

官方 mini-sglang 只支持 CUDA，``torch.cuda.*`` 散落在引擎、调度器、注意力后端各处。我们把
所有和设备相关的问题集中到这一个文件里回答：用哪个设备、还剩多少内存、默认用什么精度、
流和事件怎么建、要不要锁页、能不能用 CUDA Graph。后面的章节只调用这里的函数，
于是同一份引擎代码在 GPU 上走快路径，在没有 GPU 的笔记本上也能完整地跑起来。

流（stream）和事件（event）是 CUDA 异步执行的概念：kernel 排进流里由 GPU 异步执行，
事件用来标记"流里的工作做到了哪儿"。CPU 上的算子是同步的——函数返回时结果已经算好——
所以 CPU 上的流和事件什么都不用做。我们给它们写一套接口相同的空实现（``NullStream``、
``NullEvent``），为 CUDA 写的重叠调度代码在 CPU 上一行不改就能运行。
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from typing import Iterator, Union

import psutil
import torch

from minisgl.env import ENV

from .misc import format_bytes

__all__ = [
    "Event",
    "NullEvent",
    "NullStream",
    "Stream",
    "can_pin",
    "cuda_capability",
    "cuda_graph_available",
    "current_stream",
    "default_dtype",
    "device_summary",
    "is_sm90_supported",
    "memory_info",
    "new_event",
    "new_stream",
    "pick_device",
    "pin_memory",
    "set_stream",
    "stream_context",
    "synchronize",
]

DeviceLike = Union[torch.device, str]

# ---------------------------------------------------------------- 选设备


def pick_device(name: DeviceLike | None = None) -> torch.device:
    """选择运行设备：参数 > 环境变量 ``MINISGL_DEVICE`` > cuda > mps > cpu。

    明确要求的设备不可用时直接报错，而不是悄悄退回 CPU：用户以为在 GPU 上跑，
    结果慢了一百倍还不知道为什么，比一条错误信息糟糕得多。
    """
    if name is not None:
        name = str(name)
        source = f"pick_device({name!r})"  # 错误信息里说清楚是谁要的这个设备
    elif (name := ENV.DEVICE) is not None:
        source = f"MINISGL_DEVICE={name!r}"
    else:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")

    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise ValueError(f"{source}: invalid device ({e})") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else "no GPU visible"
            raise RuntimeError(
                f"{source}: CUDA is not available (torch {torch.__version__}, {build})"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise RuntimeError(f"{source}: only {count} CUDA device(s) are visible")
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            raise RuntimeError(f"{source}: MPS is not available on this machine")
    elif device.type != "cpu":
        raise ValueError(f"{source}: unsupported device type; minisgl runs on cpu, cuda or mps")
    return device


def default_dtype(device: DeviceLike) -> torch.dtype:
    """默认的计算精度。

    - CUDA：bfloat16（Ampere 及以后的卡都支持）——省一半显存和带宽，而且指数位和 float32
      一样多，不像 float16 那样容易溢出；老卡不支持 bf16 时退到 float16。
    - CPU / MPS：float32。多数 CPU 没有 bf16 的矩阵乘指令，bf16 反而更慢；MPS 的 bf16
      支持依赖系统版本。float32 在哪儿都能跑、数值也最接近参考实现，测试里和
      Hugging Face 对比 logits 时误差最小。
    """
    if torch.device(device).type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


# ---------------------------------------------------------------- 内存


def memory_info(device: DeviceLike) -> tuple[int, int]:
    """``(可用字节数, 总字节数)``。第 7 章的 Engine 用它决定 KV 缓存能开多大。

    - CUDA：``torch.cuda.mem_get_info``，整张卡的空闲/总显存；
    - MPS：统一内存，用 Metal 建议的上限作总量，减去驱动已分配的部分作可用量；
    - CPU：psutil 报告的整机可用/总内存。设置了 ``MINISGL_CPU_MEMORY_BUDGET`` 时，
      把它当作"本进程最多能用多少"：总量是预算，可用量是预算减去本进程已经占用的（RSS），
      这样加载权重之后可用量会变少，和 GPU 上的行为一致。
    """
    device = torch.device(device)
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return int(free), int(total)
    if device.type == "mps" and hasattr(torch.mps, "recommended_max_memory"):
        total = int(torch.mps.recommended_max_memory())
        return max(total - int(torch.mps.driver_allocated_memory()), 0), total
    vm = psutil.virtual_memory()
    free, total = int(vm.available), int(vm.total)
    budget = ENV.CPU_MEMORY_BUDGET
    if budget is not None:
        used = psutil.Process().memory_info().rss
        free, total = min(free, max(budget - used, 0)), min(total, budget)
    return free, total


def synchronize(device: DeviceLike) -> None:
    """等设备上排队的工作全部完成。CPU 是同步执行的，无事可做。"""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


# ---------------------------------------------------------------- 锁页内存


def can_pin(device: DeviceLike) -> bool:
    """要拷到 ``device`` 的 CPU 张量值不值得锁页。

    锁页（pinned）内存让 CPU -> GPU 的拷贝可以异步进行（``non_blocking=True``）。只有目标是
    CUDA 时才有意义；没有 CUDA 时锁页要么报错，要么白白占住不能换出的内存。
    用法：``torch.tensor(data, pin_memory=can_pin(device))``。
    """
    return torch.device(device).type == "cuda"


def pin_memory(t: torch.Tensor, device: DeviceLike) -> torch.Tensor:
    """目标是 CUDA 时返回锁页的副本，否则原样返回 ``t``。"""
    return t.pin_memory() if can_pin(device) else t


# >> ch04
def to_device(t: torch.Tensor, device: DeviceLike) -> torch.Tensor:
    """主机上建好的小张量搬到计算设备。CUDA 上先锁页，拷贝才能和计算重叠（non_blocking）。"""
    if torch.device(device).type == "cpu":
        return t
    return pin_memory(t, device).to(device, non_blocking=True)


__all__ += ["to_device"]


# << ch04
# >> ch11
def ints_to_device(parts: tuple[list[int], ...], device: DeviceLike) -> list[torch.Tensor]:
    """几段 int32 小数组拼成一块、一次拷到设备上，再切回几段（每一次小拷贝在主机上都要十几到
    几十微秒）。每段都从 16 字节对齐的地址开始：Triton 按指针是否 16 字节对齐各编译一份 kernel，
    紧挨着拼的话，后面几段的对齐随批大小模 4 变，服务中途碰上新的批大小就要停下来现编译。"""
    flat: list[int] = []
    starts: list[int] = []
    for part in parts:
        starts.append(len(flat))
        flat.extend(part)
        flat.extend([0] * (-len(part) % 4))  # 4 个 int32 = 16 字节
    packed = to_device(torch.tensor(flat, dtype=torch.int32), device)
    return [packed[start : start + len(part)] for start, part in zip(starts, parts)]


__all__ += ["ints_to_device"]


# << ch11
# ---------------------------------------------------------------- 流与事件


def _key(device: torch.device) -> str:
    return f"{device.type}:{device.index or 0}"


class NullStream:
    """CPU / MPS 上的"流"：方法和 ``torch.cuda.Stream`` 一样，但什么都不用做。

    CPU 上每个算子返回时就已经算完，不存在"还排在某个流里没执行"的工作，
    所以等待别的流、记录事件都没有要做的事。MPS 只有一个命令队列，顺序天然保证；
    真正要等结果时（``synchronize``）才需要等 GPU。
    """

    def __init__(self, device: DeviceLike) -> None:
        self.device = torch.device(device)

    def wait_stream(self, stream: Stream) -> None:
        pass

    def wait_event(self, event: Event) -> None:
        pass

    def record_event(self, event: Event | None = None) -> Event:
        event = event if event is not None else NullEvent(self.device)
        event.record(self)
        return event

    def query(self) -> bool:
        return True  # 没有未完成的工作

    def synchronize(self) -> None:
        synchronize(self.device)

    def __repr__(self) -> str:
        return f"NullStream(device={str(self.device)!r})"


class NullEvent:
    """CPU / MPS 上的事件：``record``/``wait`` 什么都不做，``synchronize`` 在 MPS 上等 GPU。

    ``enable_timing=True`` 时记录下 ``time.perf_counter()``，``elapsed_time`` 和 CUDA 一样返回
    毫秒数，于是计时代码也能在 CPU 上原样运行。
    """

    def __init__(self, device: DeviceLike, enable_timing: bool = False) -> None:
        self.device = torch.device(device)
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        if self.enable_timing:
            synchronize(self.device)  # MPS 是异步的：先等排队的工作做完，时间才有意义
            self._time = time.perf_counter()

    def wait(self, stream: Stream | None = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        synchronize(self.device)

    def elapsed_time(self, end: NullEvent) -> float:
        if self._time is None or end._time is None:
            raise RuntimeError("both events must be created with enable_timing=True and recorded")
        return (end._time - self._time) * 1000.0


# 类型别名：CUDA 上是真正的 torch.cuda.Stream / Event，别处是上面的空实现
Stream = Union[torch.cuda.Stream, NullStream]
Event = Union[torch.cuda.Event, NullEvent]

# CPU/MPS 上的"当前流"：每个设备一个默认流，stream_context / set_stream 可以换掉它
_default_null: dict[str, NullStream] = {}
_current_null: dict[str, NullStream] = {}


def new_stream(device: DeviceLike) -> Stream:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.Stream(device=device)
    return NullStream(device)


def new_event(device: DeviceLike, enable_timing: bool = False) -> Event:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.Event(enable_timing=enable_timing)
    return NullEvent(device, enable_timing)


def current_stream(device: DeviceLike) -> Stream:
    """设备上的当前流。CPU 上也保持"进入 stream_context(s) 之后当前流就是 s"的语义，
    这样 ``assert current_stream(dev) == self.stream`` 这类检查在 CPU 上同样成立。"""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.current_stream(device)
    key = _key(device)
    if key in _current_null:
        return _current_null[key]
    return _default_null.setdefault(key, NullStream(device))


def set_stream(stream: Stream) -> None:
    """把 ``stream`` 设为它所在设备的当前流（不会自动恢复；临时切换请用 stream_context）。"""
    if isinstance(stream, NullStream):
        _current_null[_key(stream.device)] = stream
    else:
        torch.cuda.set_stream(stream)


@contextlib.contextmanager
def stream_context(stream: Stream) -> Iterator[Stream]:
    """``with stream_context(s):`` 期间，``s`` 是当前流；退出时恢复原来的流（出错也恢复）。"""
    if not isinstance(stream, NullStream):
        with torch.cuda.stream(stream):
            yield stream
        return
    key = _key(stream.device)
    previous = _current_null.get(key)
    _current_null[key] = stream
    try:
        yield stream
    finally:
        if previous is None:
            del _current_null[key]
        else:
            _current_null[key] = previous


# ---------------------------------------------------------------- 能力查询与摘要


def cuda_graph_available(device: DeviceLike) -> bool:
    """CUDA Graph 只在 CUDA 上有；别的设备上 GraphRunner 直接关闭，每步都即时执行。"""
    return torch.device(device).type == "cuda" and torch.cuda.is_available()


def cuda_capability(device: DeviceLike | None = None) -> tuple[int, int] | None:
    """CUDA 设备的计算能力，例如 H100/H200 是 (9, 0)；不是 CUDA 时返回 None。"""
    device = torch.device(device if device is not None else "cuda")
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return major, minor


def is_sm90_supported(device: DeviceLike | None = None) -> bool:
    """是否是 Hopper（sm_90）或更新的 GPU：一些快路径（FA3、PDL）只在这些卡上可用。"""
    capability = cuda_capability(device)
    return capability is not None and capability >= (9, 0)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # 不是 Linux
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_summary(device: DeviceLike) -> str:
    """一行设备摘要，给 main 和录制输出的页眉用：名字、能力、内存。"""
    device = torch.device(device)
    free, total = memory_info(device)
    memory = f"{format_bytes(total)}（可用 {format_bytes(free)}）"
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        name = torch.cuda.get_device_name(index)
        return f"cuda:{index} · {name} · sm_{major}{minor} · 显存 {memory}"
    if device.type == "mps":
        return f"mps · Apple {platform.machine()} · 统一内存 {memory}"
    return f"cpu · {_cpu_name()} · {os.cpu_count()} 核 · 内存 {memory}"


# >> ch18
def use_triton_interpreter_unless_cuda() -> None:
    """运行设备（``pick_device()``）不是 CUDA 时让 Triton 用解释器：kernel 在 CPU 张量上逐条执行。

    看的是这个进程**用**哪个设备，而不是机器上有没有 GPU：有 GPU 的机器上设了
    ``MINISGL_DEVICE=cpu``，张量都在 CPU 上，编译出来的 GPU kernel 读不了它们。
    这个开关（环境变量 ``TRITON_INTERPRET``）只在导入 triton 的那一刻生效，所以要在第一次
    ``import triton`` 之前调用；用户自己设了这个变量时不改它。
    """
    try:
        on_cuda = pick_device().type == "cuda"
    except (RuntimeError, ValueError):  # 设备写错了：留给真正用到设备的地方报错
        on_cuda = False
    if not on_cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        _backport_interpreter_index()  # triton ≤ 3.6 的解释器遇上 NumPy ≥ 2.4（见下）


def _backport_interpreter_index() -> None:
    """给 triton 3.6 及更早的解释器补上 3.7 的一处修正（triton-lang/triton#9171）。

    解释器里的标量（kernel 的整数参数、``tl.load`` 读出的值）是形状 ``(1,)`` 的 numpy 数组，
    ``for n in range(0, end, BLOCK)`` 取边界时调用 ``int(数组)``；NumPy 2.4 起只有 0 维数组能这样
    转，旧版本上每个以运行时的值为边界的循环都报 TypeError。3.7 起先 ``squeeze()``，和这里一样。
    """
    try:
        from triton.runtime import interpreter
    except ImportError:  # 没装 triton：用不到解释器
        return
    # 每次解释执行 kernel 前给 tl.tensor 打补丁的函数。它是私有的：以后的版本没有它时，那一处
    # 早已修好，什么也不做
    patch_tensor = getattr(interpreter, "_patch_lang_tensor", None)
    if patch_tensor is None or getattr(patch_tensor, "backported", False):  # 两个模块各调用一次
        return

    def patch_tensor_with_0d_index(tensor: type, *scope: object) -> None:
        patch_tensor(tensor, *scope)
        tensor.__index__ = lambda self: int(self.handle.data.squeeze())

    patch_tensor_with_0d_index.backported = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patch_tensor_with_0d_index


__all__ += ["use_triton_interpreter_unless_cuda"]
# << ch18
