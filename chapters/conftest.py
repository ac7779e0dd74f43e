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


def current_step() -> int:
    return int(os.environ.get("MINISGL_STEP", FINAL))


def pytest_configure(config: pytest.Config) -> None:
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


# CI 在 CPU 上跑；GPU 机器上设 MINISGL_DEVICE=cuda，第 8 章起的调度器测试就在 CUDA 上跑同一组断言
TEST_DEVICE = os.environ.get("MINISGL_DEVICE", "cpu")


@pytest.fixture
def make_llm() -> Iterator[Callable[..., Any]]:
    """第 8 章起：``make_llm(model, **改动)`` 建一个 float32 的离线 ``LLM``（小 KV 池、小页表），
    测试结束时统一关掉。float32 让不同批次组合下的输出可以逐个 token 比较。"""
    created: list[Any] = []

    def make(model: Path, **overrides: Any) -> Any:
        import torch

        from minisgl.llm import LLM

        config: dict[str, Any] = dict(
            device=TEST_DEVICE,
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
