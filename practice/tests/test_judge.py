"""练习题评测器（judge_core.py 与 judge.py）的测试。"""

from __future__ import annotations

import builtins
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PRACTICE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PRACTICE))

import judge  # noqa: E402
import judge_core  # noqa: E402
from judge_core import Outcome, Report, SourceFile  # noqa: E402

JUDGE = PRACTICE / "judge.py"
PROBLEMS = PRACTICE / "problems"
MEMORY = PROBLEMS / "001-parse-memory-size"
SUMMARY = re.compile(r"(\d+) passed, (\d+) failed")


def run_judge(*args: object) -> subprocess.CompletedProcess[str]:
    # 外层超时只是保险：评测器自己的超时失效时测试也不会挂住
    return subprocess.run(
        [sys.executable, str(JUDGE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=180,
    )


def last_line(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


def count_tests(problem_dir: Path) -> int:
    return sum(
        len(judge_core.list_tests((problem_dir / name).read_text(encoding="utf-8")))
        for name in (judge_core.VISIBLE_TESTS, judge_core.HIDDEN_TESTS)
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


STATEMENT = """---
title: 演示题
chapter: 1
difficulty: 简单
runtime: browser
---

把 x 加一。
"""


def make_problem(root: Path, name: str = "001-demo", statement: str = STATEMENT) -> Path:
    """在 root 下造一道最小的题：f(x) = x + 1，可见、隐藏测试各两个。"""
    d = root / name
    d.mkdir(parents=True)
    write(d / "statement.md", statement)
    write(d / "starter.py", "def f(x):\n    raise NotImplementedError\n")
    write(d / "solution.py", "def f(x):\n    return x + 1\n")
    write(
        d / "test_visible.py",
        "from solution import f\n\n\n"
        "def test_one():\n    assert f(1) == 2, 'VISIBLE-DETAIL f(1) 应为 2'\n\n\n"
        "def test_zero():\n    assert f(0) == 1\n",
    )
    write(
        d / "test_hidden.py",
        "from solution import f\n\n\n"
        "def test_negative():\n    print('HIDDEN-PRINT')\n"
        "    assert f(-1) == 0, 'HIDDEN-SECRET f(-1) 应为 0'\n\n\n"
        "def test_big():\n    assert f(10**20) == 10**20 + 1\n",
    )
    write(d / "wrong_minus.py", "def f(x):\n    return x - 1\n")
    return d


# ---------------------------------------------------------------- judge_core


def test_summary_line_format() -> None:
    report = Report(
        status="fail",
        outcomes=[
            Outcome("test_visible.py", "test_a", True),
            Outcome("test_visible.py", "test_b", False, "boom"),
            Outcome("test_hidden.py", "test_c", True, hidden=True),
        ],
    )
    assert judge_core.summary_line(report) == "2 passed, 1 failed"
    text = judge_core.format_report(report)
    assert last_line(text) == "2 passed, 1 failed"
    assert "FAIL  test_visible.py::test_b" in text
    assert "PASS  test_hidden.py::test_c（隐藏）" in text


def test_tests_run_in_definition_order() -> None:
    source = (
        "from solution import f\n"
        "def test_b():\n    assert f() == 1\n"
        "def helper():\n    pass\n"
        "def test_a():\n    assert f() == 2\n"
    )
    report = judge_core.grade("def f():\n    return 1\n", [SourceFile("test_x.py", source)])
    assert [(o.name, o.passed) for o in report.outcomes] == [("test_b", True), ("test_a", False)]
    assert report.status == "fail"


def test_assert_message_shows_both_sides() -> None:
    tests = [
        SourceFile("test_v.py", "from solution import f\ndef test_f():\n    assert f(2) == 5\n")
    ]
    report = judge_core.grade("def f(x):\n    return x * 3\n", tests)
    message = report.outcomes[0].message
    assert "assert f(2) == 5" in message
    assert "左边：6" in message and "右边：5" in message


def test_syntax_error_is_one_load_failure() -> None:
    tests = [
        SourceFile("test_v.py", "from solution import f\ndef test_a():\n    assert f()\n"),
        SourceFile("test_h.py", "def test_b():\n    pass\ndef test_c():\n    pass\n", True),
    ]
    report = judge_core.grade("def f(:\n    return 1\n", tests)
    assert report.status == "load_error"
    assert "SyntaxError" in report.error
    assert [o.id for o in report.outcomes] == [
        "test_v.py::test_a",
        "test_h.py::test_b",
        "test_h.py::test_c",
    ]
    assert not any(o.passed for o in report.outcomes)
    text = judge_core.format_report(report)
    assert text.count("SyntaxError") == 1
    assert last_line(text) == "0 passed, 3 failed"


def test_exceptions_are_reported_per_test() -> None:
    code = "import sys\ndef f(x):\n    if x == 1:\n        sys.exit(3)\n    return {}[x]\n"
    source = (
        "from solution import f\n"
        "def test_exit():\n    f(1)\n"
        "def test_key():\n    f(2)\n"
        "def test_ok():\n    assert True\n"
    )
    report = judge_core.grade(code, [SourceFile("test_v.py", source)])
    exit_, key, ok = report.outcomes
    assert not exit_.passed and "SystemExit" in exit_.message
    assert not key.passed and "KeyError" in key.message and "solution.py" in key.message
    assert ok.passed
    assert "judge_core" not in key.message  # 评测框架自己的栈帧不显示


def test_test_file_that_cannot_import_fails_its_tests() -> None:
    source = "from solution import missing\ndef test_a():\n    pass\ndef test_b():\n    pass\n"
    report = judge_core.grade("def f():\n    pass\n", [SourceFile("test_v.py", source)])
    assert report.status == "fail"
    assert [o.passed for o in report.outcomes] == [False, False]
    assert "ImportError" in report.outcomes[0].message


def test_candidate_stdout_is_captured(capsys: pytest.CaptureFixture[str]) -> None:
    code = "print('loading')\ndef f():\n    print('inside f')\n    return 1\n"
    tests = [
        SourceFile("test_v.py", "from solution import f\ndef test_f():\n    assert f() == 1\n")
    ]
    report = judge_core.grade(code, tests)
    assert report.ok
    assert report.output.strip() == "loading"
    assert report.outcomes[0].output.strip() == "inside f"
    assert capsys.readouterr().out == ""


def test_input_does_not_block() -> None:
    tests = [SourceFile("test_v.py", "from solution import f\ndef test_f():\n    f()\n")]
    report = judge_core.grade("def f():\n    return input()\n", tests)
    assert "EOFError" in report.outcomes[0].message


def test_state_does_not_leak_between_runs() -> None:
    tests = [
        SourceFile(
            "test_v.py",
            "from solution import probe\ndef test_p():\n    assert probe() == 'fresh'\n",
        )
    ]
    dirty = (
        "import builtins, sys\n"
        "builtins.LEAKED_BY_CANDIDATE = 1\n"
        "sys.setrecursionlimit(321)\n"
        "sys.path.insert(0, '/leaked/path')\n"
        "CALLS = []\n"
        "def probe():\n"
        "    CALLS.append(1)\n"
        "    return 'fresh' if len(CALLS) == 1 else 'stale'\n"
    )
    checker = (
        "import builtins, sys\n"
        "def probe():\n"
        "    leaked = hasattr(builtins, 'LEAKED_BY_CANDIDATE') or sys.getrecursionlimit() == 321\n"
        "    return 'stale' if leaked or '/leaked/path' in sys.path else 'fresh'\n"
    )
    limit, path = sys.getrecursionlimit(), list(sys.path)
    assert judge_core.grade(dirty, tests).ok
    assert judge_core.grade(dirty, tests).ok  # 模块级状态（CALLS）每次都是新的
    assert judge_core.grade(checker, tests).ok
    assert "solution" not in sys.modules and "test_v" not in sys.modules
    assert not hasattr(builtins, "LEAKED_BY_CANDIDATE")
    assert sys.getrecursionlimit() == limit and sys.path == path


def test_run_json_redacts_hidden_details() -> None:
    import json

    request = {
        "code": "def f():\n    print('noise')\n    return 0\n",
        "tests": [
            {
                "name": "test_visible.py",
                "source": "from solution import f\ndef test_v():\n    assert f() == 1\n",
            },
            {
                "name": "test_hidden.py",
                "source": "from solution import f\ndef test_h():\n    assert f() == 2, 'SECRET'\n",
                "hidden": True,
            },
        ],
    }
    result = json.loads(judge_core.run_json(json.dumps(request)))
    visible, hidden = result["outcomes"]
    assert result["status"] == "fail"
    assert "左边：0" in visible["message"] and visible["output"].strip() == "noise"
    assert hidden == {**hidden, "passed": False, "hidden": True, "message": "", "output": ""}


def test_parse_front_matter() -> None:
    meta, body = judge_core.parse_front_matter(
        '---\ntitle: "A: B"\nchapter: 3\n# 注释\n\ndifficulty: 困难\n---\n\n正文\n'
    )
    assert meta == {"title": "A: B", "chapter": "3", "difficulty": "困难"}
    assert body == "正文\n"
    assert judge_core.parse_front_matter("没有头\n") == ({}, "没有头\n")
    with pytest.raises(ValueError, match="结尾"):
        judge_core.parse_front_matter("---\ntitle: x\n")
    with pytest.raises(ValueError, match="第 3 行"):
        judge_core.parse_front_matter("---\ntitle: x\nno colon here\n---\n")


def test_check_meta() -> None:
    good = {"title": "t", "chapter": "1", "difficulty": "简单", "runtime": "browser"}
    assert judge_core.check_meta(good) == []
    problems = judge_core.check_meta(
        {"title": "t", "chapter": "0", "difficulty": "容易", "runtime": "gpu"}
    )
    assert len(problems) == 3
    assert judge_core.check_meta({"title": "t"}) == [
        "缺少字段 chapter",
        "缺少字段 difficulty",
        "缺少字段 runtime",
    ]


# ---------------------------------------------------------------- judge.py 命令行


def test_resolve_problem_forms() -> None:
    for spec in ["1", "001", "001-parse-memory-size", "parse-memory-size"]:
        assert judge.resolve_problem(spec) == MEMORY
    with pytest.raises(judge.ProblemError, match="001-parse-memory-size"):
        judge.resolve_problem("999")


def test_cli_reference_passes_with_exit_0() -> None:
    result = run_judge("1", MEMORY / "solution.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert last_line(result.stdout) == f"{count_tests(MEMORY)} passed, 0 failed"


def test_cli_starter_fails_with_exit_1() -> None:
    result = run_judge("001", MEMORY / "starter.py")
    assert result.returncode == 1
    assert last_line(result.stdout) == f"0 passed, {count_tests(MEMORY)} failed"
    assert "NotImplementedError" in result.stdout


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run_judge("999", MEMORY / "solution.py").returncode == 2
    assert run_judge("1", tmp_path / "nope.py").returncode == 2
    assert run_judge("1").returncode == 2


def test_cli_timeout_verdict(tmp_path: Path) -> None:
    candidate = write(
        tmp_path / "loop.py", "def parse_memory_size(text):\n    while True:\n        pass\n"
    )
    result = run_judge("1", candidate, "--timeout", "3")
    assert result.returncode == 1
    assert "超时" in result.stdout
    assert last_line(result.stdout) == f"0 passed, {count_tests(MEMORY)} failed"


def test_cli_syntax_error(tmp_path: Path) -> None:
    candidate = write(tmp_path / "bad.py", "def parse_memory_size(text)\n    return 0\n")
    result = run_judge("1", candidate)
    assert result.returncode == 1
    assert "候选代码加载失败" in result.stdout
    assert result.stdout.count("SyntaxError") == 1
    assert last_line(result.stdout) == f"0 passed, {count_tests(MEMORY)} failed"


def test_cli_process_exit_is_a_crash(tmp_path: Path) -> None:
    candidate = write(tmp_path / "exit.py", "import os\nos._exit(0)\n")
    result = run_judge("1", candidate)
    assert result.returncode == 1
    assert "评测进程异常退出" in result.stdout
    assert SUMMARY.fullmatch(last_line(result.stdout))


def test_cli_hidden_messages_not_printed(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    make_problem(problems)
    candidate = write(
        tmp_path / "answer.py", "def f(x):\n    print('CANDIDATE-PRINT')\n    return 99\n"
    )
    result = run_judge("1", candidate, "--problems-dir", problems)
    out = result.stdout
    assert result.returncode == 1
    assert "VISIBLE-DETAIL" in out and "CANDIDATE-PRINT" in out  # 可见测试的信息与输出照常显示
    assert "FAIL  test_hidden.py::test_negative（隐藏）" in out
    assert "FAIL  test_hidden.py::test_big（隐藏）" in out
    assert "HIDDEN-SECRET" not in out and "HIDDEN-PRINT" not in out
    assert "100000000000000000001" not in out  # 隐藏测试的断言两边也不显示
    assert last_line(out) == "0 passed, 4 failed"


def test_cli_list() -> None:
    result = run_judge("--list")
    assert result.returncode == 0
    for problem in judge.find_problems():
        assert f"{problem.number:03d}" in result.stdout
        assert problem.title in result.stdout


def test_browser_problems_are_stdlib_only() -> None:
    problems = judge.find_problems()
    assert sum(p.runtime == "browser" for p in problems) >= 3
    for problem in problems:
        assert judge.static_problems(problem) == [], problem.name


# ---------------------------------------------------------------- --self-check


def test_self_check_passes_on_real_problems() -> None:
    result = run_judge("--self-check")
    assert result.returncode == 0, result.stdout + result.stderr
    n = len(judge.problem_dirs(PROBLEMS))
    assert n >= 3
    assert last_line(result.stdout) == f"{n} passed, 0 failed"
    assert result.stdout.count("\nok    ") == n


def test_self_check_fails_when_solution_is_broken(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    copy = shutil.copytree(MEMORY, problems / MEMORY.name)
    # 换成一个只在隐藏测试里露馅的答案
    shutil.copy(copy / "wrong_float.py", copy / "solution.py")
    result = run_judge("--self-check", "--problems-dir", problems)
    assert result.returncode == 1
    assert f"FAIL  {MEMORY.name}" in result.stdout
    assert "参考答案没有全部通过" in result.stdout
    assert last_line(result.stdout) == "0 passed, 1 failed"


def test_self_check_on_a_good_tmp_problem(tmp_path: Path) -> None:
    make_problem(tmp_path)
    result = run_judge("--self-check", "--problems-dir", tmp_path)
    assert result.returncode == 0, result.stdout
    assert last_line(result.stdout) == "1 passed, 0 failed"


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("wrong_passes", "wrong_oops.py 通过了全部测试"),
        ("starter_passes", "starter.py 通过了全部测试"),
        ("bad_difficulty", "difficulty"),
        ("missing_title", "缺少字段 title"),
        ("non_stdlib_import", "浏览器题只能用标准库"),
        ("missing_hidden_tests", "缺少文件 test_hidden.py"),
        ("wrong_does_not_load", "无法加载"),
        ("wrong_syntax_error", "wrong_minus.py 第 1 行有语法错误"),
        ("duplicate_number", "编号与"),
    ],
)
def test_self_check_detects_broken_problems(tmp_path: Path, breakage: str, expected: str) -> None:
    d = make_problem(tmp_path)
    if breakage == "wrong_passes":
        shutil.copy(d / "solution.py", d / "wrong_oops.py")
    elif breakage == "starter_passes":
        shutil.copy(d / "solution.py", d / "starter.py")
    elif breakage == "bad_difficulty":
        write(d / "statement.md", STATEMENT.replace("简单", "容易"))
    elif breakage == "missing_title":
        write(d / "statement.md", STATEMENT.replace("title: 演示题\n", ""))
    elif breakage == "non_stdlib_import":
        write(d / "solution.py", "import numpy\n\n\ndef f(x):\n    return x + 1\n")
    elif breakage == "missing_hidden_tests":
        (d / "test_hidden.py").unlink()
    elif breakage == "wrong_does_not_load":
        write(d / "wrong_minus.py", "raise RuntimeError('boom')\n")
    elif breakage == "wrong_syntax_error":
        write(d / "wrong_minus.py", "def f(x)\n    return x - 1\n")
    elif breakage == "duplicate_number":
        make_problem(tmp_path, "001-other")
    result = run_judge("--self-check", "--problems-dir", tmp_path)
    assert result.returncode == 1, result.stdout
    assert expected in result.stdout
    _passed, failed = map(int, SUMMARY.fullmatch(last_line(result.stdout)).groups())
    assert failed >= 1
