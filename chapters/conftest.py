"""所有章节测试共用的 fixture。steps.py 会把本文件复制进每一章的切片。

- 在切片里运行时（MINISGL_SLICE_ROOT 已设置），先确认导入的 minisgl 来自切片，而不是仓库里的完整包；
- 环境变量 MINISGL_STEP 是当前切片的章号（没有设置时表示完整的包）；
  标了 ``@pytest.mark.until_chapter(n)`` 的测试只在第 n 章及以前的切片上运行。
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

FINAL = 10**9


def test_device() -> str:
    """测试用的设备，和包里的选法相同（``pick_device``）：``MINISGL_DEVICE`` > cuda > mps > cpu。
    CPU 上的 CI 和有 GPU 的机器跑同一组断言；要在 GPU 机器上测 CPU，设 ``MINISGL_DEVICE=cpu``。"""
    from minisgl.utils.device import pick_device

    return str(pick_device())


def current_step() -> int:
    return int(os.environ.get("MINISGL_STEP", FINAL))


def pytest_configure(config: pytest.Config) -> None:
    # 第 18 章：测试不在 CUDA 上跑时 Triton 只能解释执行，而这个开关只在第一次导入 triton 时
    # 生效——在任何测试（或者它们导入的库）碰到 triton 之前打开。和包里的选法相同，看测试用的设备
    if not test_device().startswith("cuda"):
        os.environ.setdefault("TRITON_INTERPRET", "1")
    root = os.environ.get("MINISGL_SLICE_ROOT")
    if root:
        import minisgl

        here = os.path.realpath(minisgl.__file__)
        if not here.startswith(os.path.realpath(root) + os.sep):
            raise pytest.UsageError(f"minisgl 应该来自切片 {root}，实际来自 {here}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    step = current_step()
    for item in items:
        marker = item.get_closest_marker("until_chapter")
        if marker is not None and step > int(marker.args[0]):
            item.add_marker(
                pytest.mark.skip(
                    reason=f"只对第 {marker.args[0]} 章及以前的切片成立（当前 {step}）"
                )
            )


@pytest.fixture(scope="session")
def models_dir(pytestconfig: pytest.Config) -> Path:
    """内嵌模型所在目录（make_tiny_model.py --ensure 生成）。"""
    path = pytestconfig.rootpath / "models"
    if not (path / "tiny-qwen3" / "config.json").exists():
        pytest.fail("没有找到内嵌模型：先运行 python tools/make_tiny_model.py --ensure")
    return path


@pytest.fixture(scope="session")
def tiny_model(models_dir: Path) -> Path:
    """默认的内嵌小模型（Qwen3 结构、真实的 Qwen 词表、随机但不退化的权重）。"""
    return models_dir / "tiny-qwen3"


@pytest.fixture(scope="session")
def demo_chat(models_dir: Path) -> Path:
    """训练过的演示聊天模型（Qwen3 结构、真实的 Qwen 词表和聊天模板，float32）：用聊天模板
    包好的问题能答对加减法、排序、倒序、复述，所以生成的文字本身就能检查引擎。"""
    path = models_dir / "demo-chat"
    if not (path / "config.json").exists():
        pytest.fail("没有找到演示模型：先运行 python tools/make_tiny_model.py --ensure")
    return path


@pytest.fixture
def make_llm() -> Iterator[Callable[..., Any]]:
    """第 8 章起：``make_llm(model, **改动)`` 建一个 float32 的离线 ``LLM``（小 KV 池、小页表），
    测试结束时统一关掉。float32 让不同批次组合下的输出可以逐个 token 比较。"""
    created: list[Any] = []

    def make(model: Path, **overrides: Any) -> Any:
        import torch

        from minisgl.llm import LLM

        config: dict[str, Any] = dict(
            device=test_device(),
            dtype=torch.float32,
            num_pages=512,
            max_running_reqs=8,
            max_seq_len=256,
        )
        config.update(overrides)
        llm = LLM(model, **config)
        created.append(llm)
        return llm

    yield make
    for llm in created:
        llm.shutdown()


@pytest.fixture
def bf16_round_to_nearest(monkeypatch: pytest.MonkeyPatch) -> None:
    """第 19 章：Triton 的解释器把 float32 转 bfloat16 时直接截断，GPU 上是就近舍入
    （``cvt.rn.bf16.f32``）。解释器里换成就近舍入，逐位比较的测试在两边断言同一件事。"""
    if test_device().startswith("cuda"):
        return
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    convert = interpreter._convert_float

    def rounded(data, src, dst, mode):  # type: ignore[no-untyped-def]
        if src == tl.float32 and dst == tl.bfloat16:
            t = torch.from_numpy(np.array(data, dtype=np.float32, copy=True))
            return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        return convert(data, src, dst, mode)

    monkeypatch.setattr(interpreter, "_convert_float", rounded)


@pytest.fixture
def page_table_copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """第 19 章：数 ``scheduler/cache.py`` 里主机到设备的拷贝（每次记下元素个数）。"""
    from minisgl.scheduler import cache

    calls: list[int] = []
    real = cache.to_device

    def counting(t: Any, device: Any) -> Any:
        calls.append(t.numel())
        return real(t, device)

    monkeypatch.setattr(cache, "to_device", counting)
    return calls


@pytest.fixture
def ipc_dir() -> Iterator[str]:
    """第 12 章起：放 ipc socket 文件的短目录，测试结束时删掉。

    为什么不用 pytest 的 ``tmp_path``：Unix domain socket 的路径存在 ``sockaddr_un.sun_path`` 里，
    Linux 上最多 107 字节、macOS 上最多 103 字节。macOS 的 ``tmp_path`` 形如
    ``/private/var/folders/9k/…/T/pytest-of-you/pytest-12/test_名字0/``，光目录就一百多字节，
    拼上文件名 ZMQ 就拒绝 bind。所以固定在 /tmp 下开一个短目录（``/tmp/msgl-xxxxxxxx``）。
    """
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="msgl-", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class ServerKit:
    """第 16 章起：真的起服务（``python -m minisgl``，端口 0）并收拾干净的几样工具。

    第 15 章的测试里有同样的几个函数（那一章第一次讲它们）；之后的章节共用这一份。
    每个服务在自己的进程组里启动，``kill_group`` 整组杀掉；所有等待都有时限。
    """

    START_TIMEOUT = 300.0  # 加载模型、起进程；机器很忙时也够

    def __init__(self, model: Path) -> None:
        self.model = model

    def start(self, log: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
        import re
        import subprocess
        import sys
        import time

        import httpx

        cmd = [sys.executable, "-m", "minisgl", "--model", str(self.model), "--port", "0"]
        cmd += ["--dtype", "float32", *extra]
        full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, start_new_session=True
            )
        deadline = time.monotonic() + self.START_TIMEOUT
        try:
            while True:
                text = log.read_text(encoding="utf-8", errors="replace")
                m = re.search(r"API server is ready on http://127\.0\.0\.1:(\d+)", text)
                if m:
                    server = RunningServer(proc, int(m.group(1)), log)
                    assert httpx.get(server.url("/health"), timeout=60).status_code == 200
                    return server
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited with {proc.returncode}:\n{text[-4000:]}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"server not ready:\n{text[-4000:]}")
                time.sleep(0.2)
        except BaseException:
            kill_group(proc)
            raise


class RunningServer:
    def __init__(self, proc: Any, port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def post(self, path: str, timeout: float = 120.0, **body: Any) -> Any:
        import httpx

        return httpx.post(self.url(path), json=body, timeout=timeout)

    def metrics(self) -> dict[str, float]:
        """``/metrics`` 里不带标签的样本：名字 → 值。"""
        import httpx

        text = httpx.get(self.url("/metrics"), timeout=60).text
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def kill(self) -> None:
        kill_group(self.proc)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM，等它退出；返回退出码。无论如何最后整组杀掉。"""
        import signal

        try:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=timeout)
        finally:
            kill_group(self.proc)


def kill_group(proc: Any) -> None:
    """最后的保险：整个进程组 SIGKILL。"""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def server_kit(tiny_model: Path) -> ServerKit:
    return ServerKit(tiny_model)


@pytest.fixture(scope="session")
def wait_until() -> Callable[[Callable[[], bool], float, str], None]:
    return wait_for
