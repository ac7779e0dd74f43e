"""第 1 章：设备选择、内存信息、流与事件的空实现、锁页、能力查询。

CUDA 的分支在 CPU 上通过 monkeypatch 模拟"有 GPU"来测（CPU 上的孪生测试）；
真有 GPU 时，最后几个测试再在真的 CUDA 上跑一遍。
"""

from __future__ import annotations

import psutil
import pytest
import torch

from minisgl.env import EnvSettings
from minisgl.utils import (
    NullEvent,
    NullStream,
    can_pin,
    cuda_capability,
    cuda_graph_available,
    current_stream,
    default_dtype,
    device_summary,
    is_sm90_supported,
    memory_info,
    new_event,
    new_stream,
    pick_device,
    pin_memory,
    set_stream,
    stream_context,
    synchronize,
)

HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in EnvSettings.variables():
        monkeypatch.delenv(var.name, raising=False)


def fake_hardware(
    monkeypatch: pytest.MonkeyPatch, cuda: int = 0, mps: bool = False, bf16: bool = True
) -> None:
    """假装这台机器有 ``cuda`` 块 GPU、有没有 MPS。"""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


# ---------------------------------------------------------------- pick_device


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(2, True, "cuda"), (1, False, "cuda"), (0, True, "mps"), (0, False, "cpu")],
)
def test_pick_prefers_cuda_then_mps_then_cpu(
    monkeypatch: pytest.MonkeyPatch, cuda: int, mps: bool, expected: str
) -> None:
    fake_hardware(monkeypatch, cuda=cuda, mps=mps)
    assert pick_device() == torch.device(expected)


def test_env_overrides_automatic_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hardware(monkeypatch, cuda=2, mps=True)
    monkeypatch.setenv("MINISGL_DEVICE", "cpu")
    assert pick_device() == torch.device("cpu")
    monkeypatch.setenv("MINISGL_DEVICE", "cuda:1")
    assert pick_device() == torch.device("cuda", 1)


def test_argument_overrides_env(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hardware(monkeypatch, cuda=1)
    monkeypatch.setenv("MINISGL_DEVICE", "cuda")
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device(torch.device("cuda", 0)) == torch.device("cuda", 0)


@pytest.mark.parametrize(
    ("cuda", "mps", "request_", "message"),
    [
        (0, False, "cuda", "pick_device('cuda'): CUDA is not available"),
        (2, False, "cuda:2", "pick_device('cuda:2'): only 2 CUDA device(s) are visible"),
        (1, False, "mps", "pick_device('mps'): MPS is not available"),
    ],
)
def test_unavailable_device_is_an_error(
    monkeypatch: pytest.MonkeyPatch, cuda: int, mps: bool, request_: str, message: str
) -> None:
    """要求的设备不可用时报错，不悄悄退回 CPU。"""
    fake_hardware(monkeypatch, cuda=cuda, mps=mps)
    with pytest.raises(RuntimeError) as info:
        pick_device(request_)
    assert message in str(info.value)


def test_unavailable_device_from_env_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hardware(monkeypatch, cuda=0)
    monkeypatch.setenv("MINISGL_DEVICE", "cuda")
    with pytest.raises(RuntimeError, match="MINISGL_DEVICE='cuda': CUDA is not available"):
        pick_device()


@pytest.mark.parametrize(("request_", "message"), [("banana", "invalid device"), ("meta", "cpu")])
def test_unknown_or_unsupported_device(request_: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pick_device(request_)


# ---------------------------------------------------------------- dtype 与内存


def test_default_dtype_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_dtype("cpu") == torch.float32
    assert default_dtype(torch.device("mps")) == torch.float32
    fake_hardware(monkeypatch, cuda=1, bf16=True)
    assert default_dtype("cuda") == torch.bfloat16
    fake_hardware(monkeypatch, cuda=1, bf16=False)
    assert default_dtype("cuda:0") == torch.float16


def test_memory_info_on_cpu_is_sane() -> None:
    free, total = memory_info("cpu")
    assert 0 < free <= total
    assert total == psutil.virtual_memory().total


def test_cpu_memory_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """预算是"本进程最多用多少"：总量等于预算，可用量 = 预算 - 本进程已占用的内存。"""
    rss = psutil.Process().memory_info().rss
    budget = rss + 256 * 1024**2
    monkeypatch.setenv("MINISGL_CPU_MEMORY_BUDGET", str(budget))
    free, total = memory_info("cpu")
    assert total == budget
    assert 0 < free <= 256 * 1024**2 + 16 * 1024**2  # 允许 rss 在两次测量之间有少许变化
    monkeypatch.setenv("MINISGL_CPU_MEMORY_BUDGET", "1M")  # 比本进程已占用的还少
    assert memory_info("cpu") == (0, 1024**2)


def test_memory_info_on_cuda_uses_mem_get_info(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[torch.device] = []

    def mem_get_info(device: torch.device) -> tuple[int, int]:
        calls.append(device)
        return 3 * 1024**3, 80 * 1024**3

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    assert memory_info("cuda:1") == (3 * 1024**3, 80 * 1024**3)
    assert calls == [torch.device("cuda", 1)]


# ---------------------------------------------------------------- 同步与锁页


def test_synchronize_only_touches_the_right_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[object] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: synced.append(("cuda", d)))
    monkeypatch.setattr(torch.mps, "synchronize", lambda: synced.append("mps"))
    synchronize("cpu")
    assert synced == []
    synchronize("cuda:0")
    synchronize("mps")
    assert synced == [("cuda", torch.device("cuda", 0)), "mps"]


def test_pin_only_for_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    t = torch.arange(4)
    assert pin_memory(t, "cpu") is t and not t.is_pinned()
    assert pin_memory(t, "mps") is t
    assert (can_pin("cpu"), can_pin("mps"), can_pin("cuda:0")) == (False, False, True)
    pinned = torch.arange(4)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned)
    assert pin_memory(t, torch.device("cuda")) is pinned


# ---------------------------------------------------------------- 流与事件


def test_null_stream_context_and_current_stream() -> None:
    default = current_stream("cpu")
    assert isinstance(default, NullStream) and current_stream("cpu") is default
    side = new_stream("cpu")
    assert isinstance(side, NullStream) and side is not default
    with stream_context(side) as entered:
        assert entered is side and current_stream("cpu") is side
        inner = new_stream("cpu")
        with stream_context(inner):
            assert current_stream("cpu") is inner
        assert current_stream("cpu") is side
    assert current_stream("cpu") is default
    with pytest.raises(ValueError), stream_context(side):
        raise ValueError("boom")
    assert current_stream("cpu") is default  # 出错也恢复


def test_set_stream_on_cpu() -> None:
    default = current_stream("cpu")
    mine = new_stream("cpu")
    set_stream(mine)
    try:
        assert current_stream("cpu") is mine
        with stream_context(default):
            assert current_stream("cpu") is default
        assert current_stream("cpu") is mine
    finally:
        set_stream(default)
    assert current_stream("cpu") is default


def test_null_event_methods() -> None:
    event = new_event("cpu")
    assert isinstance(event, NullEvent)
    stream = new_stream("cpu")
    event.record(stream)
    event.wait(stream)
    event.synchronize()
    assert event.query() and stream.query()
    stream.wait_event(event)
    assert isinstance(stream.record_event(), NullEvent)
    with pytest.raises(RuntimeError, match="enable_timing"):
        event.elapsed_time(new_event("cpu"))
    start, end = new_event("cpu", enable_timing=True), new_event("cpu", enable_timing=True)
    start.record()
    end.record()
    assert start.elapsed_time(end) >= 0.0


def overlapped_step(device: torch.device, x: torch.Tensor) -> list[int]:
    """一段照 CUDA 写法写的"重叠"代码：在副流上计算，拷回 CPU，用事件等拷贝完成。"""
    main = current_stream(device)
    side = new_stream(device)
    side.wait_stream(main)
    done = new_event(device)
    with stream_context(side):
        y = (x.to(device, non_blocking=True) * 2 + 1).to("cpu", non_blocking=True)
        done.record(side)
    main.wait_stream(side)
    done.synchronize()  # 读 y 之前等拷贝完成
    return y.tolist()


def test_cuda_style_code_runs_unchanged_on_cpu() -> None:
    assert overlapped_step(torch.device("cpu"), torch.arange(4)) == [1, 3, 5, 7]


def test_cuda_factories_are_used_for_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeStream:
        def __init__(self, device: torch.device) -> None:
            self.device = device

    class FakeEvent:
        def __init__(self, enable_timing: bool = False) -> None:
            self.enable_timing = enable_timing

    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    stream = new_stream("cuda:0")
    assert isinstance(stream, FakeStream) and stream.device == torch.device("cuda", 0)
    event = new_event("cuda", enable_timing=True)
    assert isinstance(event, FakeEvent) and event.enable_timing


# ---------------------------------------------------------------- 能力查询与摘要


def test_capabilities_off_cuda() -> None:
    assert not cuda_graph_available("cpu")
    assert not cuda_graph_available("mps")
    assert cuda_capability("cpu") is None
    assert not is_sm90_supported("cpu")


@pytest.mark.parametrize(("capability", "sm90"), [((8, 0), False), ((9, 0), True), ((10, 0), True)])
def test_capabilities_with_fake_cuda(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], sm90: bool
) -> None:
    fake_hardware(monkeypatch, cuda=1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: capability)
    assert cuda_graph_available("cuda")
    assert cuda_capability() == capability
    assert is_sm90_supported() is sm90


def test_device_summary_cpu() -> None:
    summary = device_summary("cpu")
    assert summary.startswith("cpu · ") and "核" in summary and "GiB" in summary
    assert "\n" not in summary  # 录制输出的页眉只取一行


def test_device_summary_fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (40 * 1024**3, 80 * 1024**3))
    assert device_summary("cuda") == "cuda:0 · Fake GPU · sm_90 · 显存 80.00 GiB（可用 40.00 GiB）"


# ---------------------------------------------------------------- 真的 CUDA（有 GPU 时）


@pytest.mark.skipif(not HAS_CUDA, reason="需要 CUDA；CPU 上的孪生测试见上面的 fake CUDA 测试")
def test_real_cuda_streams_and_memory() -> None:
    device = pick_device("cuda:0")
    stream, event = new_stream(device), new_event(device)
    assert isinstance(stream, torch.cuda.Stream) and isinstance(event, torch.cuda.Event)
    with stream_context(stream):
        assert current_stream(device) == stream
    assert overlapped_step(device, torch.arange(4)) == [1, 3, 5, 7]
    free, total = memory_info(device)
    assert 0 < free <= total
    assert pin_memory(torch.arange(4), device).is_pinned()
    assert cuda_graph_available(device)
    assert default_dtype(device) in (torch.bfloat16, torch.float16)
