"""练习题评测器（judge_core.py 与 judge.py）的测试。"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

PRACTICE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PRACTICE))

import judge  # noqa: E402
import judge_core  # noqa: E402
import judge_sandbox  # noqa: E402
from judge_core import Outcome, Report, SourceFile  # noqa: E402

JUDGE = PRACTICE / "judge.py"
PROBLEMS = PRACTICE / "problems"
MEMORY = PROBLEMS / "001-parse-memory-size"
SUMMARY = re.compile(r"(\d+) passed, (\d+) failed")


def run_judge(*args: object, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    # 外层超时只是保险：评测器自己的超时失效时测试也不会挂住
    return subprocess.run(
        [sys.executable, str(JUDGE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
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
    # 全部题目，浏览器题还要在 Pyodide 里每次用新解释器再评一遍：忙碌的 2 核机器上要几分钟
    result = run_judge("--self-check", timeout=1200)
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
        ("wrong_times_out", "wrong_minus.py 超时"),
        ("wrong_crashes", "wrong_minus.py 无法加载或运行（crash）"),
        ("wrong_cheats", "wrong_minus.py 无法加载或运行（invalid）"),
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
    elif breakage == "wrong_times_out":  # 超时不等于被测试抓住：机器快一点它也许就“通过”了
        write(d / "wrong_minus.py", "def f(x):\n    while True:\n        pass\n")
    elif breakage == "wrong_crashes":
        write(d / "wrong_minus.py", "import os\n\n\ndef f(x):\n    os._exit(1)\n")
    elif breakage == "wrong_cheats":
        write(d / "wrong_minus.py", "import gc\n\n\ndef f(x):\n    return gc.get_referrers(x)\n")
    timeout = ["--timeout", "2"] if breakage == "wrong_times_out" else []
    result = run_judge("--self-check", "--problems-dir", tmp_path, "--no-pyodide", *timeout)
    assert result.returncode == 1, result.stdout
    assert expected in result.stdout
    _passed, failed = map(int, SUMMARY.fullmatch(last_line(result.stdout)).groups())
    assert failed >= 1


# ---------------------------------------------------------------- 作弊与破坏：判定必须是真的
#
# 每个攻击写成一份恶意的答案，放进临时题目（f(x) = x + 1）里评测。除了判定失败、说明原因之外，
# 每次都核对：题目文件没变、评测的临时目录删掉了、没有留下任何进程。

DEMO_TESTS = 4  # make_problem 造的题一共 4 个测试
FAILED_ALL = f"0 passed, {DEMO_TESTS} failed"


@pytest.fixture(scope="module")
def sandbox() -> dict[str, object]:
    """这台机器上子进程的沙箱实际启用了什么（Landlock、seccomp）。"""
    details: dict[str, object] = {}
    tests = [SourceFile("test_v.py", "from solution import f\ndef test_f():\n    assert f()\n")]
    report = judge.grade_source("def f():\n    return 1\n", tests, details=details)
    assert report.ok, judge_core.format_report(report)
    return details


def leftover_processes(root: Path) -> list[int]:
    """环境变量 TMPDIR 指向 root 之下的活进程：评测的子进程和它的子孙都带着它。"""
    found = []
    marker = f"TMPDIR={root}".encode()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in environ and state not in ("Z", "X"):
            found.append(int(proc.name))
    return found


def wait_gone(root: Path, seconds: float = 3.0) -> list[int]:
    """等 SIGKILL 生效：root 之下还活着的进程（等够 seconds 秒还在就返回它们）。"""
    deadline = time.monotonic() + seconds
    while (left := leftover_processes(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def snapshot_files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def attack(
    tmp_path: Path, code: str, *args: object, wrapper: str = ""
) -> subprocess.CompletedProcess[str]:
    """用命令行评测一份恶意答案，并核对它没有留下痕迹。wrapper 是包在评测器外面的 Python 代码。"""
    problem = make_problem(tmp_path / "problems")
    before = snapshot_files(problem)
    judge_tmp = tmp_path / "judge-tmp"
    judge_tmp.mkdir()
    candidate = write(tmp_path / "attack.py", code)
    command = [str(JUDGE), "1", str(candidate), "--problems-dir", str(tmp_path / "problems")]
    command += map(str, args)
    prefix = ["-c", wrapper, *command] if wrapper else command
    try:
        result = subprocess.run(
            [sys.executable, *prefix],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "TMPDIR": str(judge_tmp)},
        )
    finally:
        left = wait_gone(judge_tmp)
        for pid in left:  # 测试失败时也别让它们一直跑下去
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert left == [], f"评测之后还有进程活着：{left}"
    assert list(judge_tmp.iterdir()) == [], "评测的临时目录没有删掉"
    assert snapshot_files(problem) == before, "题目文件被改动了"
    assert "Traceback" not in result.stderr, result.stderr
    return result


needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="只在 Linux 上")


@needs_linux
def test_attack_atexit_hook_cannot_rewrite_the_result(tmp_path: Path) -> None:
    # 旧的评测器把结果写进文件、文件路径在 sys.argv 里；现在 argv 里只有结果管道的编号
    marker = Path("/dev/shm") / f"minisgl-judge-atexit-{uuid.uuid4().hex}"
    code = (
        "import atexit, os, sys\n"
        "def forge():\n"
        f"    open({str(marker)!r}, 'w').close()\n"
        "    os.write(int(sys.argv[1]), b'[\"done\"]')\n"
        "atexit.register(forge)\n"
        "def f(x):\n    return x\n"
    )
    try:
        result = attack(tmp_path, code)
        assert result.returncode == 1
        assert "VISIBLE-DETAIL" in result.stdout  # 照常判为答案错误
        assert last_line(result.stdout) == FAILED_ALL
        if marker.parent.is_dir():
            assert not marker.exists(), "报告完之后 atexit 钩子还运行了"
    finally:
        marker.unlink(missing_ok=True)


def test_attack_forged_result_and_os_exit(tmp_path: Path) -> None:
    forged = (
        "import os, sys\n"
        'payload = b\'["outcome","test_visible.py","test_one",true,"",""]\'\n'
        "frame = len(payload).to_bytes(4, 'big') + bytes(32) + payload\n"
        "os.write(int(sys.argv[1]), frame)\n"
        "os._exit(0)\n"
    )
    result = attack(tmp_path, forged)
    assert result.returncode == 1
    assert "评测结果无效" in result.stdout and "签名不对" in result.stdout
    assert last_line(result.stdout) == FAILED_ALL

    quiet = attack(tmp_path / "quiet", "import os\nos._exit(0)\n")
    assert quiet.returncode == 1
    assert "评测进程异常退出" in quiet.stdout and "没有报告完整的结果" in quiet.stdout


def test_attack_replacing_judge_functions(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "main = sys.modules['__main__']\n"
        "core = sys.modules['judge_core']\n"
        "main.main = lambda *a: None\n"
        "core._assertion_message = lambda *a: ''\n"
        "def f(x):\n    return x\n"
    )
    result = attack(tmp_path, code)
    assert result.returncode == 1
    assert "评测结果无效" in result.stdout and "被替换了" in result.stdout
    assert last_line(result.stdout) == FAILED_ALL


def test_attack_rewriting_test_sources_through_frames(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "frame = sys._getframe()\n"
        "while frame is not None:\n"
        "    for value in list(frame.f_locals.values()):\n"
        "        for item in value if isinstance(value, list) else []:\n"
        "            if hasattr(item, 'source'):\n"
        "                item.source = 'def test_one():\\n    pass\\n'\n"
        "    frame = frame.f_back\n"
        "def f(x):\n    return x\n"
    )
    result = attack(tmp_path, code)
    assert result.returncode == 1
    assert "VISIBLE-DETAIL" in result.stdout  # 跑的还是原来的测试
    assert last_line(result.stdout) == FAILED_ALL


def test_attack_replacing_test_functions_through_frames(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "def f(x):\n"
        "    test_globals = sys._getframe(1).f_globals\n"
        "    for name in list(test_globals):\n"
        "        if name.startswith('test_'):\n"
        "            test_globals[name] = lambda: None\n"
        "    return x\n"
    )
    result = attack(tmp_path, code)
    assert result.returncode == 1
    assert "被换掉了" in result.stdout
    assert last_line(result.stdout) == FAILED_ALL


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (
            "import sys\n"
            "def f(x):\n"
            "    sys.audit('minisgl.judge.progress', 'outcome', 'test_visible.py', 'test_one',"
            " True, '', '')\n"
            "    return x\n",
            "冒充评测器",
        ),
        ("import gc\ndef f(x):\n    gc.get_referrers(f)\n    return x\n", "gc.get_referrers"),
        ("import sys\ndef f(x):\n    sys.settrace(None)\n    return x\n", "sys.settrace"),
        ("import ctypes\nctypes.string_at(id(0), 8)\ndef f(x):\n    return x\n", "ctypes"),
    ],
    ids=["fake-progress-event", "gc", "settrace", "ctypes"],
)
def test_attack_interpreter_tricks_are_refused(tmp_path: Path, code: str, reason: str) -> None:
    result = attack(tmp_path, code)
    assert result.returncode == 1
    assert "评测结果无效" in result.stdout and reason in result.stdout
    assert last_line(result.stdout) == FAILED_ALL


def test_attack_rewriting_the_problem_files(tmp_path: Path) -> None:
    # 答案找到题目目录，把测试改成空的：Landlock 让它写不了；没有 Landlock 时评测后发现并改回去
    problem = tmp_path / "problems" / "001-demo"
    code = (
        "from pathlib import Path\n"
        f"for name in ('test_visible.py', 'test_hidden.py'):\n"
        f"    Path({str(problem)!r}, name).write_text('def test_one():\\n    pass\\n')\n"
        "def f(x):\n    return x\n"
    )
    result = attack(tmp_path, code)  # attack() 核对了题目文件没变
    assert result.returncode == 1
    assert "PermissionError" in result.stdout or "受保护的文件被改动" in result.stdout
    assert last_line(result.stdout) == FAILED_ALL
    again = run_judge("1", problem / "solution.py", "--problems-dir", tmp_path / "problems")
    assert last_line(again.stdout) == f"{DEMO_TESTS} passed, 0 failed"


def test_rewritten_problem_files_are_restored_without_landlock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = make_problem(tmp_path / "problems")
    before = snapshot_files(problem)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = (
        "import os\n"
        "from pathlib import Path\n"
        f"Path({str(problem)!r}, 'test_visible.py').write_text('def test_one():\\n    pass\\n')\n"
        f"os.remove(Path({str(problem)!r}, 'test_hidden.py'))\n"
        "def f(x):\n    return x + 1\n"  # 连答案本身都是对的：改题目文件照样判为无效
    )
    limits = judge.Limits(landlock=False)
    report = judge.grade_source(code, judge.load_problem(problem).tests(), limits=limits,
                                guard=[problem])  # fmt: skip
    assert report.status == "invalid"
    assert "受保护的文件被改动" in report.error and "test_hidden.py" in report.error
    assert not report.passed
    assert snapshot_files(problem) == before
    assert [p for p in tmp_path.iterdir() if p.name.startswith("minisgl-judge-")] == []


@needs_linux
def test_attack_killing_the_judge(tmp_path: Path, sandbox: dict[str, object]) -> None:
    if not sandbox["seccomp"] and not sandbox["landlock"]:
        pytest.skip(f"这台机器上 seccomp 与 Landlock 都用不了：{sandbox['sandbox']}")
    code = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef f(x):\n    return x + 1\n"
    result = attack(tmp_path, code)
    assert result.returncode == 1, result  # 评测器自己活着，给出了判定
    assert "PermissionError" in result.stdout
    assert last_line(result.stdout) == FAILED_ALL


@needs_linux
def test_attack_setsid_grandchild_is_killed(tmp_path: Path, sandbox: dict[str, object]) -> None:
    if not sandbox["seccomp"]:
        pytest.skip(f"没有 seccomp，读者代码能用 setsid 离开进程组：{sandbox['sandbox']}")
    code = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    try:\n"
        "        os.setsid()\n"
        "    except OSError as exc:\n"
        "        print('setsid:', exc)\n"
        "    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "def f(x):\n    return x + 1\n"
    )
    result = attack(tmp_path, code)  # attack() 核对了没有留下进程
    assert result.returncode == 0, result.stdout  # 答案本身是对的


@needs_linux
def test_attack_unbounded_allocation(tmp_path: Path) -> None:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n"
    result = attack(tmp_path, code, "--memory", "128")
    assert result.returncode == 1
    assert "MemoryError" in result.stdout and "内存上限" in result.stdout
    assert last_line(result.stdout) == FAILED_ALL


# 把评测器包一层，结束时报告它自己（父进程）用过的最大内存。用 /proc/self/status 的 VmHWM，
# 不用 getrusage 的 ru_maxrss：后者把启动它的进程在 exec 之前的内存峰值也算进来（CI 里启动它的
# pytest 进程已经导入了 torch，有 600 MB）
PEAK_RSS = (
    "import runpy, sys\n"
    "sys.argv = sys.argv[1:]\n"
    "try:\n"
    "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "with open('/proc/self/status') as status:\n"
    "    peak = next(line.split()[1] for line in status if line.startswith('VmHWM:'))\n"
    "print('PEAK_RSS_KB', peak, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@needs_linux
def test_attack_flooding_file_descriptor_1(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "chunk = b'\\x1b[2J' * (1 << 18)\n"
        "for _ in range(300):\n"  # 300 MiB
        "    os.write(1, chunk)\n"
        "def f(x):\n    return x\n"
    )
    result = attack(tmp_path, code, wrapper=PEAK_RSS)
    assert result.returncode == 1
    assert f"{300 << 20} 字节的输出" in result.stdout and "超过上限" in result.stdout
    peak_kb = int(re.search(r"PEAK_RSS_KB (\d+)", result.stderr).group(1))
    assert peak_kb < 150 * 1024, f"评测器读输出用了 {peak_kb} KiB 内存"
    assert last_line(result.stdout) == FAILED_ALL


def test_attack_deleting_the_working_directory(tmp_path: Path) -> None:
    code = "import os, shutil\nshutil.rmtree(os.getcwd(), ignore_errors=True)\n"
    result = attack(tmp_path, code + "def f(x):\n    return x\n")
    assert result.returncode == 1
    assert last_line(result.stdout) == FAILED_ALL


def test_deleted_working_directory_without_landlock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 没有 Landlock 时工作目录真的被删掉了：评测照常给出判定，也不出错
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    problem = make_problem(tmp_path / "problems")
    code = "import os, shutil\nshutil.rmtree(os.getcwd())\ndef f(x):\n    return x + 1\n"
    limits = judge.Limits(landlock=False)
    report = judge.grade_source(code, judge.load_problem(problem).tests(), limits=limits)
    assert report.ok, judge_core.format_report(report)
    assert [p for p in tmp_path.iterdir() if p.name.startswith("minisgl-judge-")] == []


def test_control_characters_are_escaped(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "def f(x):\n"
        "    print('\\x1b[2J\\x1b[31mRED\\x07')\n"
        "    return x\n"
        "os.write(2, b'\\x1b]0;title\\x07')\n"
    )
    result = attack(tmp_path, code)
    assert result.returncode == 1
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\\x1b[2J\\x1b[31mRED\\x07" in result.stdout
    crash = attack(tmp_path / "crash", "import os\nos.write(2, b'\\x1b[31mboom')\nos._exit(3)\n")
    assert "\x1b" not in crash.stdout and "\\x1b[31mboom" in crash.stdout


def test_time_limit_starts_after_heavy_imports(tmp_path: Path) -> None:
    """测试文件导入 torch：导入要好几秒，但时限只有 1 秒，照样通过（导入不计时）。"""
    pytest.importorskip("torch")
    problem = make_problem(tmp_path / "problems", statement=STATEMENT.replace("browser", "local"))
    write(problem / "test_visible.py", "import torch\nfrom solution import f\n\n\n"
          "def test_one():\n    assert f(1) == 2\n")  # fmt: skip
    details: dict[str, object] = {}
    tests = judge.load_problem(problem).tests()
    report = judge.grade_source("def f(x):\n    return x + 1\n", tests, 1.0, details=details)
    assert report.ok, judge_core.format_report(report)
    assert details["startup_s"] > details["test_s"]  # 导入 torch 算在启动里
    loop = judge.grade_source("def f(x):\n    while True:\n        pass\n", tests, 1.0)
    assert loop.status == "timeout"


def test_results_are_checked_against_the_tests_sent() -> None:
    expected = [("t.py", "test_a", False), ("t.py", "test_b", True)]

    def feed(*messages: list[object]) -> judge._Run:
        run = judge._Run(expected=expected, log=judge._Log(100))
        for message in [["start", True, True, ""], ["load", True, "", ""], *messages]:
            run.take(list(message))
        return run

    ok = feed(["outcome", "t.py", "test_a", True, "", ""], ["outcome", "t.py", "test_b", False,
              "m", ""], ["done"])  # fmt: skip
    assert ok.done and not ok.invalid
    swapped = feed(["outcome", "t.py", "test_b", True, "", ""])
    assert "对不上" in swapped.invalid
    short = feed(["outcome", "t.py", "test_a", True, "", ""], ["done"])
    assert "只报告了 1 个" in short.invalid
    extra = feed(*[["outcome", "t.py", n, True, "", ""] for n in ("test_a", "test_b", "test_c")])
    assert "多出来" in extra.invalid
    wrong_type = feed(["outcome", "t.py", "test_a", "yes", "", ""])
    assert "不认识" in wrong_type.invalid


def test_frame_reader_checks_signatures_and_order() -> None:
    key = b"k" * 32
    payload = b'["start",true,true,""]'

    def frame(seq: int, body: bytes, secret: bytes = key) -> bytes:
        mac = judge_sandbox.frame_mac(secret, seq, body)
        return len(body).to_bytes(4, "big") + mac + body

    reader = judge_sandbox.FrameReader(key)
    data = frame(0, payload) + frame(1, b'["done"]')
    assert reader.feed(data[:10]) == []  # 不完整的消息先攒着
    assert reader.feed(data[10:]) == [["start", True, True, ""], ["done"]]
    with pytest.raises(judge_sandbox.ChannelError, match="签名不对"):
        judge_sandbox.FrameReader(key).feed(frame(0, payload, b"x" * 32))
    with pytest.raises(judge_sandbox.ChannelError, match="签名不对"):
        judge_sandbox.FrameReader(key).feed(frame(1, payload))  # 编号不对：重放或顺序被打乱
    with pytest.raises(judge_sandbox.ChannelError, match="格式不对"):
        judge_sandbox.FrameReader(key).feed(frame(0, b'[1, {"a": 2}]'))


@needs_linux
def test_setsid_grandchild_is_found_without_seccomp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 没有 seccomp 时 setsid 能离开进程组、躲过 killpg；评测器再按环境变量 TMPDIR 找一遍
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    problem = make_problem(tmp_path / "problems")
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(120)\n"
        "    os._exit(0)\n"
        "def f(x):\n    return x + 1\n"
    )
    limits = judge.Limits(seccomp=False)
    report = judge.grade_source(code, judge.load_problem(problem).tests(), limits=limits)
    left = wait_gone(tmp_path)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert report.ok, judge_core.format_report(report)
    assert left == []


def test_time_limit_front_matter(tmp_path: Path) -> None:
    statement = STATEMENT.replace("runtime: browser\n", "runtime: browser\ntime_limit: 1.5\n")
    problem = make_problem(tmp_path / "problems", statement=statement)
    assert judge.load_problem(problem).time_limit == 1.5
    loop = write(tmp_path / "loop.py", "def f(x):\n    while True:\n        pass\n")
    result = run_judge("1", loop, "--problems-dir", tmp_path / "problems")
    assert result.returncode == 1
    assert "时限 1.5 秒" in result.stdout and "超过 1.5 秒" in result.stdout
    assert judge.load_problem(MEMORY).time_limit == judge.DEFAULT_TIMEOUT
    for bad in ("0", "abc", "601"):
        assert any("time_limit" in p for p in judge_core.check_meta({"time_limit": bad}))


# 在钩子运行到一半时插进来：回收读者对象时的 __del__、信号处理函数。它们顺着栈帧找签名用的 send
CODE_AT_HOOK_TIME = """
import gc, os, signal, sys

def forge(frame):
    while frame is not None:
        send = frame.f_locals.get("send")
        if callable(send):
            for name in ("test_one", "test_zero"):
                send(("outcome", "test_visible.py", name, True, "", ""))
            for name in ("test_negative", "test_big"):
                send(("outcome", "test_hidden.py", name, True, "", ""))
            send(("done",))
            os._exit(0)
        frame = frame.f_back

class Bomb:
    def __del__(self):
        forge(sys._getframe(1))

def f(x):
    gc.set_threshold(1)  # 每分配一个对象就回收一次：钩子里一分配，__del__ 就在钩子里运行
    for _ in range(100):
        bomb = Bomb()
        bomb.me = bomb
    return x
"""


def test_attack_code_running_inside_the_hook(tmp_path: Path) -> None:
    result = attack(tmp_path, CODE_AT_HOOK_TIME)
    assert result.returncode == 1
    assert "VISIBLE-DETAIL" in result.stdout  # 照常判为答案错误，没有伪造成功
    assert last_line(result.stdout) == FAILED_ALL


def test_attack_signal_handler_is_refused(tmp_path: Path) -> None:
    code = CODE_AT_HOOK_TIME + (
        "signal.signal(signal.SIGALRM, lambda signum, frame: forge(frame))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)\n"
    )
    result = attack(tmp_path, code)
    assert result.returncode == 1
    assert "signal only works in main thread" in result.stdout
    assert last_line(result.stdout) == FAILED_ALL
