"""第 1 章：整数运算、call_if_main、登记表、日志、torch 小工具、utils 的惰性导出。"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterator

import pytest
import torch

import minisgl
import minisgl.utils
from minisgl.env import EnvSettings
from minisgl.utils import (
    Registry,
    align_down,
    align_up,
    call_if_main,
    div_ceil,
    div_even,
    dtype_from_str,
    format_bytes,
    init_logger,
    nvtx_annotate,
    set_log_rank,
    torch_dtype,
)

# 包含 minisgl 包的目录：子进程里把它放进 PYTHONPATH，确保导入的是同一份 minisgl（切片或完整包）
PACKAGE_PARENT = str(Path(minisgl.__file__).resolve().parent.parent)


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run(
        [sys.executable, *args] if args else [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in EnvSettings.variables():
        monkeypatch.delenv(var.name, raising=False)
    yield
    set_log_rank(None)


# ---------------------------------------------------------------- 整数运算


def test_div_even() -> None:
    assert div_even(32, 4) == 8
    assert div_even(0, 4) == 0
    with pytest.raises(ValueError, match="14 is not divisible by 4"):
        div_even(14, 4)
    with pytest.raises(ValueError, match="divisor must be positive"):
        div_even(8, 0)


def test_div_even_replicates_kv_heads() -> None:
    """8 个 KV 头、tp=16：每个 rank 放 1 个头，每个头有 2 份副本。"""
    assert div_even(8, 16, allow_replicate=True) == 1
    assert div_even(2, 2, allow_replicate=True) == 1
    assert div_even(8, 4, allow_replicate=True) == 2  # 够分时照常均分
    with pytest.raises(ValueError, match="not divisible"):
        div_even(8, 16)  # 不允许复制时照样报错
    with pytest.raises(ValueError, match="16 is not a multiple of 3"):
        div_even(3, 16, allow_replicate=True)


def test_div_ceil_and_alignment() -> None:
    assert [div_ceil(n, 16) for n in (0, 1, 16, 17, 1000)] == [0, 1, 1, 2, 63]
    assert [align_up(n, 16) for n in (0, 1, 16, 17, 1000)] == [0, 16, 16, 32, 1008]
    assert [align_down(n, 16) for n in (0, 1, 16, 17, 1000)] == [0, 0, 16, 16, 992]
    with pytest.raises(ValueError, match="alignment must be positive"):
        align_down(10, 0)
    with pytest.raises(ValueError, match="divisor must be positive"):
        align_up(10, -4)


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(3 * 1024**3) == "3.00 GiB"
    assert format_bytes(2 * 1024**4) == "2.00 TiB"


# ---------------------------------------------------------------- call_if_main


def test_call_if_main_runs_only_for_main_module() -> None:
    calls: list[str] = []

    def from_script() -> None:
        calls.append("script")

    def from_library() -> None:
        calls.append("library")

    from_script.__module__ = "__main__"
    from_library.__module__ = "some.library"
    assert call_if_main(from_script) is from_script
    assert call_if_main(from_library) is from_library  # 原样返回，导入方还能调用它
    assert calls == ["script"]


def test_call_if_main_in_a_real_script(tmp_path: Path) -> None:
    """当脚本运行时执行，被导入时不执行（官方不带参数的 call_if_main() 在导入时也会执行）。"""
    script = tmp_path / "demo_script.py"
    script.write_text(
        textwrap.dedent(
            """
            from minisgl.utils.misc import call_if_main

            @call_if_main
            def main():
                print("ran main")
            """
        )
    )
    as_script = run_python("", str(script))
    assert as_script.returncode == 0, as_script.stderr
    assert as_script.stdout.strip() == "ran main"
    imported = run_python(f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import demo_script")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == ""


# ---------------------------------------------------------------- Registry


def test_registry_register_and_get() -> None:
    reg: Registry[Callable[[int], int]] = Registry("activation")

    @reg.register("square")
    def square(x: int) -> int:
        return x * x

    @reg.register("double")
    def double(x: int) -> int:
        return 2 * x

    assert square(3) == 9  # 装饰器原样返回被装饰的函数
    assert reg.get("square") is square and reg.get("double")(5) == 10
    assert reg.names() == ["double", "square"]  # 排好序，与登记顺序无关
    assert "square" in reg and "cube" not in reg and len(reg) == 2


def test_registry_errors() -> None:
    reg: Registry[type] = Registry("attention backend")
    with pytest.raises(ValueError, match=r"unknown attention backend 'fa'; supported: \(none\)"):
        reg.get("fa")
    reg.register("torch")(int)
    reg.register("flash")(float)
    with pytest.raises(ValueError, match="attention backend 'torch' is already registered"):
        reg.register("torch")
    with pytest.raises(ValueError) as info:
        reg.get("triton")
    assert str(info.value) == "unknown attention backend 'triton'; supported: flash, torch"
    assert reg.get("torch") is int  # 重名登记失败后，原来的登记不受影响


# ---------------------------------------------------------------- 日志

LINE = re.compile(r"^\[\d\d:\d\d:\d\d (?P<tag>\S+)\] (?P<level>[A-Z]+) +(?P<msg>.*)$")


def parsed_lines(text: str) -> list[tuple[str, str, str]]:
    lines = []
    for line in text.splitlines():
        m = LINE.match(line)
        assert m, f"not a log line: {line!r}"
        lines.append((m["tag"], m["level"], m["msg"]))
    return lines


def test_logger_format_goes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    logger = init_logger("minisgl.test_ch01.a")
    tagged = init_logger("minisgl.test_ch01.b", "initializer")
    logger.info("hello %s", "world")
    tagged.warning("careful")
    out = capsys.readouterr()
    assert out.err == ""
    assert parsed_lines(out.out) == [
        ("test_ch01.a", "INFO", "hello world"),  # 没有 suffix 时用去掉 minisgl. 的模块名
        ("initializer", "WARNING", "careful"),
    ]


def test_logger_rank0_helpers(capsys: pytest.CaptureFixture[str]) -> None:
    logger = init_logger("minisgl.test_ch01.rank", "sched")
    logger.info_rank0("single process counts as rank 0")
    set_log_rank(1)
    logger.info_rank0("hidden on rank 1")
    logger.warning_rank0("also hidden on rank 1")
    logger.info("every rank prints this")
    set_log_rank(0)
    logger.error_rank0("rank 0 prints this")
    assert parsed_lines(capsys.readouterr().out) == [
        ("sched", "INFO", "single process counts as rank 0"),
        ("sched|rank=1", "INFO", "every rank prints this"),
        ("sched|rank=0", "ERROR", "rank 0 prints this"),
    ]


def test_logger_level_from_env_and_no_duplicates(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MINISGL_LOG_LEVEL", "warning")
    logger = init_logger("minisgl.test_ch01.level")
    logger = init_logger("minisgl.test_ch01.level")  # 再配置一次不会多出一个 handler
    logger.info("dropped")
    logger.debug_rank0("dropped too")
    logger.warning("kept")
    assert parsed_lines(capsys.readouterr().out) == [("test_ch01.level", "WARNING", "kept")]
    verbose = init_logger("minisgl.test_ch01.level", level="debug")  # 参数优先于环境变量
    verbose.debug("now visible")
    assert parsed_lines(capsys.readouterr().out) == [("test_ch01.level", "DEBUG", "now visible")]


# ---------------------------------------------------------------- torch 小工具


def test_torch_dtype_restores_even_on_error() -> None:
    before = torch.get_default_dtype()
    with torch_dtype(torch.float16):
        assert torch.empty(2).dtype == torch.float16
        with torch_dtype(torch.bfloat16):
            assert torch.empty(2).dtype == torch.bfloat16
        assert torch.empty(2).dtype == torch.float16
    assert torch.get_default_dtype() == before
    with pytest.raises(RuntimeError, match="boom"), torch_dtype(torch.float64):
        raise RuntimeError("boom")
    assert torch.get_default_dtype() == before


def test_dtype_from_str() -> None:
    assert dtype_from_str("bfloat16") is torch.bfloat16
    assert dtype_from_str("BF16") is torch.bfloat16
    assert dtype_from_str("torch.float16") is torch.float16
    assert dtype_from_str(" float32 ") is torch.float32
    with pytest.raises(ValueError, match="unknown dtype 'int8'; supported: bf16, bfloat16"):
        dtype_from_str("int8")


class _Layer:
    def __init__(self, layer_id: int) -> None:
        self.layer_id = layer_id

    @nvtx_annotate("Layer_{}", layer_id_field="layer_id")
    def forward(self, x: int) -> int:
        return x + self.layer_id


def test_nvtx_is_a_noop_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_be_called(*args: object) -> None:
        raise AssertionError("NVTX called without CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", must_not_be_called)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", must_not_be_called)
    monkeypatch.setattr(torch.cuda.nvtx, "range", must_not_be_called)
    assert _Layer(3).forward(1) == 4
    assert _Layer.forward.__name__ == "forward"  # functools.wraps 保留了名字
    with nvtx_annotate("sample"):
        value = 42
    assert value == 42


def test_nvtx_ranges_with_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU 上模拟"有 CUDA"：检查推入的名字（含层号）和 push/pop 的配对。"""
    events: list[str] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: events.append(f"push {name}"))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: events.append("pop"))

    class FakeRange:
        def __init__(self, name: str) -> None:
            self.name = name

        def __enter__(self) -> None:
            events.append(f"push {self.name}")

        def __exit__(self, *exc: object) -> None:
            events.append("pop")

    monkeypatch.setattr(torch.cuda.nvtx, "range", FakeRange)
    assert _Layer(7).forward(1) == 8
    with pytest.raises(KeyError), nvtx_annotate("sample"):
        raise KeyError("x")  # 出错也要 pop
    assert events == ["push Layer_7", "pop", "push sample", "pop"]


# ---------------------------------------------------------------- 包的导入与惰性导出


def test_import_minisgl_does_not_import_torch() -> None:
    code = (
        "import sys, minisgl, minisgl.env; "
        "from minisgl.env import ENV; ENV.describe(); "
        "assert 'torch' not in sys.modules, 'torch was imported'; print(minisgl.__version__)"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == minisgl.__version__


def test_utils_imports_only_its_eager_modules() -> None:
    """import minisgl.utils 只导入本章的五个模块；以后加进 utils/ 的模块要等用到才导入。"""
    code = (
        "import sys, minisgl.utils; "
        "print(sorted(m for m in sys.modules if m.startswith('minisgl.utils.')))"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    eager = ["device", "logger", "misc", "registry", "torch_utils"]
    assert result.stdout.strip() == str([f"minisgl.utils.{m}" for m in eager])


@pytest.fixture
def extra_utils_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """给 minisgl.utils 临时加一个搜索目录，模拟后面章节往 utils/ 里加的模块。"""
    monkeypatch.setattr(minisgl.utils, "__path__", [*minisgl.utils.__path__, str(tmp_path)])
    yield tmp_path
    # 直接操作 __dict__：hasattr(minisgl.utils, ...) 本身就会触发 __getattr__ 去导入子模块
    for name in ["a_lazy_probe", "a_broken_probe", "PROBE_VALUE"]:
        minisgl.utils.__dict__.pop(name, None)
        sys.modules.pop(f"minisgl.utils.{name}", None)


def test_lazy_export_from_a_new_submodule(extra_utils_dir: Path) -> None:
    (extra_utils_dir / "a_lazy_probe.py").write_text(
        "__all__ = ['PROBE_VALUE']\nPROBE_VALUE = 42\nNOT_EXPORTED = 1\n"
    )
    assert "minisgl.utils.a_lazy_probe" not in sys.modules
    from minisgl.utils import PROBE_VALUE  # 本文件没改 utils/__init__.py，照样能导入

    assert PROBE_VALUE == 42
    assert "minisgl.utils.a_lazy_probe" in sys.modules
    assert minisgl.utils.__dict__["PROBE_VALUE"] == 42  # 缓存起来，下次不再经过 __getattr__
    with pytest.raises(AttributeError):
        minisgl.utils.NOT_EXPORTED  # noqa: B018  不在 __all__ 里的名字不导出


def test_lazy_lookup_errors(extra_utils_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (extra_utils_dir / "a_lazy_probe.py").write_text("__all__ = ['PROBE_VALUE']\nPROBE_VALUE = 1\n")
    (extra_utils_dir / "a_broken_probe.py").write_text("import a_package_that_does_not_exist\n")
    # 只搜索临时目录：避免把以后章节的重量级模块都导入一遍
    monkeypatch.setattr(minisgl.utils, "__path__", [str(extra_utils_dir)])
    with pytest.raises(AttributeError, match="__wrapped__"):
        minisgl.utils.__wrapped__  # noqa: B018
    assert "minisgl.utils.a_lazy_probe" not in sys.modules  # 下划线开头的名字不触发任何导入
    with pytest.raises(AttributeError) as info:
        minisgl.utils.no_such_name  # noqa: B018
    message = str(info.value)
    assert "'minisgl.utils' has no attribute 'no_such_name'" in message
    assert "could not import: a_broken_probe" in message  # 导入失败的模块要说出来
    assert "minisgl.utils.a_lazy_probe" in sys.modules  # 找名字时确实逐个导入了子模块
