"""run_tests.py 的汇总：失败的一步在汇总里重复它输出的最后几行。"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import run_tests  # noqa: E402


def test_summary_repeats_the_tail_of_a_failed_stage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = "; ".join(f"print('line {i}')" for i in range(10))
    fake = [
        ("lint", "passes", [sys.executable, "-c", "print('fine')"]),
        ("slices", "fails", [sys.executable, "-c", f"{lines}; print(); raise SystemExit(3)"]),
    ]
    monkeypatch.setattr(run_tests, "stages", lambda n_jobs: fake)
    assert run_tests.main([]) == 1
    out = capsys.readouterr().out
    summary = out[out.index("===== 汇总") :].splitlines()
    assert summary[1].startswith("  ✓ passes")
    assert summary[2].startswith("  ✗ fails")
    # 空行不算；最后 TAIL_LINES 行原样缩进重复，更早的不重复
    shown = [f"      line {i}" for i in range(10 - run_tests.TAIL_LINES, 10)]
    assert summary[3 : 3 + run_tests.TAIL_LINES] == shown
    assert "      fine" not in summary
    assert summary[-1] == "失败的步骤：fails"
    assert out.count("\nline 9\n") == 1  # 照常打印的那一次（汇总里的带缩进）


def test_output_that_is_not_utf8_is_passed_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """半个汉字之类的坏字节换成替换字符照样转印，汇总照常。"""
    code = "import sys; sys.stdout.buffer.write(b'half \\xe4\\xb8 char\\n'); sys.exit(1)"
    monkeypatch.setattr(
        run_tests, "stages", lambda n_jobs: [("lint", "bad", [sys.executable, "-c", code])]
    )
    assert run_tests.main([]) == 1
    assert "      half \ufffd char" in capsys.readouterr().out


def test_only_named_stages_run(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = [("lint", "a", [sys.executable, "-c", "pass"]), ("pytest", "b", ["false"])]
    monkeypatch.setattr(run_tests, "stages", lambda n_jobs: fake)
    assert run_tests.main(["lint"]) == 0
    assert run_tests.main(["pytest"]) == 1
    assert run_tests.main(["nope"]) == 2


def test_a_stage_that_hangs_fails_on_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """卡住的一步到时被杀掉、记为失败，后面的步骤照常运行，汇总照常打印。"""
    fake = [
        ("slices", "hangs", [sys.executable, "-c", "import time; time.sleep(600)"]),
        ("pytest", "after", [sys.executable, "-c", "print('ran')"]),
    ]
    monkeypatch.setattr(run_tests, "stages", lambda n_jobs: fake)
    monkeypatch.setitem(run_tests.STAGE_TIMEOUT, "slices", 2)
    assert run_tests.main([]) == 1
    out = capsys.readouterr().out
    summary = out[out.index("===== 汇总") :]
    assert "✗ hangs" in summary and "✓ after" in summary
    assert "超时：2 秒还没有结束" in summary
