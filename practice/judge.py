"""练习题的本地评测命令。

    python practice/judge.py 1 我的答案.py        # 评测一道题（编号可写 1、001 或目录名）
    python practice/judge.py --list               # 列出所有题目
    python practice/judge.py --self-check         # 自检：参考答案全过，starter 与 wrong_*.py 都不过
                                                  # （浏览器题另在 Node 的 Pyodide 里再评测一遍）

评测在子进程里进行（``sys.executable judge_core.py``），超时就杀掉子进程，所以死循环不会卡住命令；
需要 torch 的题（runtime: local）用的也是当前解释器，环境里有 torch 就能评测。
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

PRACTICE_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(PRACTICE_DIR))

import judge_core  # noqa: E402 —— 需要先把 practice/ 放进 sys.path
from judge_core import Report, SourceFile  # noqa: E402

PROBLEMS_DIR = PRACTICE_DIR / "problems"
JUDGE_CORE = PRACTICE_DIR / "judge_core.py"
DEFAULT_TIMEOUT = 10.0
# 自检验证的是题目本身对不对，不是快不快：机器很忙时（CI 里别的测试同时在跑）也不能因为慢而失败
SELF_CHECK_TIMEOUT = 60.0
# 浏览器题的 Pyodide 自检：Node 脚本与 npm ci 装好的 Pyodide（都在仓库根目录下）
REPO_DIR = PRACTICE_DIR.parent
PYODIDE_SCRIPT = REPO_DIR / "tools" / "web" / "judge_pyodide.mjs"
PYODIDE_PACKAGE = REPO_DIR / "node_modules" / "pyodide" / "pyodide.mjs"

_DIR_PATTERN = re.compile(r"(\d{3})-([a-z0-9]+(?:-[a-z0-9]+)*)")
_REQUIRED_FILES = ("statement.md", "starter.py", "solution.py", "test_visible.py", "test_hidden.py")
# Pyodide 里没有或用不了的标准库模块：浏览器题不能用
_NOT_IN_BROWSER = {
    "tkinter",
    "turtle",
    "turtledemo",
    "curses",
    "readline",
    "idlelib",
    "subprocess",
    "multiprocessing",
    "pydoc_data",
}


class ProblemError(Exception):
    """题目目录不合规（缺文件、front matter 不对等）。"""


@dataclass
class Problem:
    dir: Path
    number: int
    slug: str
    title: str
    chapter: int  # 附录的题是 0
    difficulty: str
    runtime: str
    body: str
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def chapter_label(self) -> str:
        """第 N 章；附录的题（chapter: appendix，记成 0）是「附录」。"""
        return "附录" if self.chapter == 0 else f"第 {self.chapter} 章"

    def tests(self) -> list[SourceFile]:
        """可见测试在前、隐藏测试在后。"""
        files = [(judge_core.VISIBLE_TESTS, False), (judge_core.HIDDEN_TESTS, True)]
        return [
            SourceFile(name, (self.dir / name).read_text(encoding="utf-8"), hidden)
            for name, hidden in files
        ]

    def wrong_answers(self) -> list[Path]:
        return sorted(self.dir.glob("wrong_*.py"))


def problem_dirs(problems_dir: Path) -> list[Path]:
    """problems_dir 下所有 ``NNN-slug`` 目录，按名字排序。"""
    if not problems_dir.is_dir():
        return []
    return sorted(
        p for p in problems_dir.iterdir() if p.is_dir() and _DIR_PATTERN.fullmatch(p.name)
    )


def load_problem(path: Path) -> Problem:
    """读取一道题的元信息；目录不合规时抛 ProblemError。"""
    match = _DIR_PATTERN.fullmatch(path.name)
    if match is None:
        raise ProblemError(f"{path.name}：目录名应为 NNN-slug（三位编号、小写字母数字和连字符）")
    missing = [name for name in _REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise ProblemError(f"{path.name}：缺少文件 {', '.join(missing)}")
    try:
        meta, body = judge_core.parse_front_matter(
            (path / "statement.md").read_text(encoding="utf-8")
        )
    except ValueError as exc:
        raise ProblemError(f"{path.name}/statement.md：{exc}") from exc
    if not meta:
        raise ProblemError(f"{path.name}/statement.md：缺少 --- 包住的 front matter")
    errors = judge_core.check_meta(meta)
    if errors:
        raise ProblemError(f"{path.name}/statement.md：" + "；".join(errors))
    return Problem(
        dir=path,
        number=int(match.group(1)),
        slug=match.group(2),
        title=meta["title"],
        chapter=0 if meta["chapter"] == judge_core.APPENDIX else int(meta["chapter"]),
        difficulty=meta["difficulty"],
        runtime=meta["runtime"],
        body=body,
        meta=meta,
    )


def find_problems(problems_dir: Path = PROBLEMS_DIR) -> list[Problem]:
    return [load_problem(p) for p in problem_dirs(problems_dir)]


def resolve_problem(spec: str, problems_dir: Path = PROBLEMS_DIR) -> Path:
    """把 ``1``、``001``、``001-parse-memory-size`` 或 ``parse-memory-size`` 解析成题目目录。"""
    dirs = problem_dirs(problems_dir)
    for d in dirs:
        number, slug = d.name.split("-", 1)
        if spec == d.name or spec == slug or (spec.isdigit() and int(spec) == int(number)):
            return d
    available = "、".join(d.name for d in dirs) or "（没有题目）"
    raise ProblemError(f"找不到题目 {spec!r}；现有题目：{available}")


# ---------------------------------------------------------------- 子进程评测


def _kill(proc: subprocess.Popen[bytes]) -> None:
    # 子进程在自己的进程组里：连同读者代码可能启动的孙进程一起杀掉
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def grade_source(code: str, tests: list[SourceFile], timeout: float = DEFAULT_TIMEOUT) -> Report:
    """在子进程里评测一段代码；超时或子进程异常退出时，所有测试记为失败。"""
    with tempfile.TemporaryDirectory(prefix="minisgl-judge-") as tmp:
        work = Path(tmp)
        request = work / "request.json"
        result = work / "result.json"
        log = work / "log.txt"
        payload = {"code": code, "tests": [asdict(t) for t in tests]}
        request.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
        env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONDONTWRITEBYTECODE="1")
        with open(log, "wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, str(JUDGE_CORE), str(request), str(result)],
                cwd=work,  # 读者代码写的文件都落在临时目录里，评测完一起删掉
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            try:
                returncode = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return judge_core.timeout_report(tests, timeout)
        if returncode != 0 or not result.is_file():
            detail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
            return judge_core.crash_report(tests, f"退出码 {returncode}\n{detail}")
        return Report.from_dict(json.loads(result.read_text(encoding="utf-8")))


def grade_file(problem: Problem, candidate: Path, timeout: float = DEFAULT_TIMEOUT) -> Report:
    return grade_source(candidate.read_text(encoding="utf-8"), problem.tests(), timeout)


# ---------------------------------------------------------------- 自检


def _imported_modules(source: str, filename: str) -> list[tuple[str, int]]:
    """源码里 import 的顶层模块名及行号；相对导入记为 "."。"""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.extend((alias.name.split(".")[0], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            name = "." if node.level else (node.module or "").split(".")[0]
            found.append((name, node.lineno))
    return found


def static_problems(problem: Problem) -> list[str]:
    """不运行代码就能发现的问题：语法错误、测试为空或重名、浏览器题用了非标准库模块。"""
    errors = []
    if not problem.body.strip():
        errors.append("statement.md 没有正文")
    for path in sorted(problem.dir.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        try:
            modules = _imported_modules(source, path.name)
        except SyntaxError as exc:
            errors.append(f"{path.name} 第 {exc.lineno} 行有语法错误：{exc.msg}")
            continue
        if path.name.startswith("test_"):
            tree = ast.parse(source, path.name)
            defs = [
                n.name
                for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
            ]
            if not defs:
                errors.append(f"{path.name} 里没有 test_* 函数")
            for name in sorted({d for d in defs if defs.count(d) > 1}):
                errors.append(f"{path.name} 里 {name} 定义了不止一次，前面的会被覆盖")
        if problem.runtime != "browser":
            continue
        for module, line in modules:
            if module == judge_core.CANDIDATE_MODULE:
                continue
            if module == "." or module not in sys.stdlib_module_names:
                errors.append(f"{path.name} 第 {line} 行导入了 {module!r}：浏览器题只能用标准库")
            elif module in _NOT_IN_BROWSER:
                errors.append(f"{path.name} 第 {line} 行导入了 {module!r}：Pyodide 里不能用")
    return errors


@dataclass
class CheckResult:
    name: str
    ok: bool
    summary: str
    errors: list[str] = field(default_factory=list)


def _fraction(report: Report) -> str:
    return f"{report.passed}/{len(report.outcomes)}"


def check_problem(path: Path, timeout: float) -> CheckResult:
    """自检一道题：目录合规；参考答案全过；starter 和每个 wrong_*.py 至少挂一个测试。"""
    try:
        problem = load_problem(path)
    except ProblemError as exc:
        return CheckResult(path.name, False, "目录不合规", [str(exc)])
    errors = static_problems(problem)
    if errors:
        return CheckResult(path.name, False, "静态检查未通过", errors)

    tests = problem.tests()
    parts = []
    reference = grade_source((path / "solution.py").read_text(encoding="utf-8"), tests, timeout)
    parts.append(f"参考答案 {_fraction(reference)}")
    if not reference.ok:
        failed = [o.id for o in reference.outcomes if not o.passed]
        reason = reference.error.splitlines()[0] if reference.error else "、".join(failed)
        errors.append(f"参考答案没有全部通过（{reference.status}）：{reason}")

    for path_ in [path / "starter.py", *problem.wrong_answers()]:
        report = grade_source(path_.read_text(encoding="utf-8"), tests, timeout)
        only_hidden = report.ok is False and all(o.passed for o in report.outcomes if not o.hidden)
        parts.append(
            f"{path_.name} {_fraction(report)}" + ("（仅隐藏测试不过）" if only_hidden else "")
        )
        if report.ok:
            errors.append(f"{path_.name} 通过了全部测试，但它应当至少挂一个")
        elif report.status in ("load_error", "crash"):
            first = report.error.splitlines()[-1] if report.error else report.status
            errors.append(f"{path_.name} 无法加载或运行（{report.status}）：{first}")
    return CheckResult(path.name, not errors, "；".join(parts), errors)


# ---------------------------------------------------------------- Pyodide 自检


@dataclass
class PyodideCheck:
    """浏览器题在 Pyodide（Node）里的自检结果。"""

    python: str = ""
    load_ms: list[int] = field(default_factory=list)
    grade_ms: list[int] = field(default_factory=list)
    summaries: dict[str, str] = field(default_factory=dict)  # 题目 → 一句话结果
    errors: dict[str, list[str]] = field(default_factory=dict)  # 题目 → 问题
    note: str = ""  # 跳过或整体失败时的说明


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _pyodide_jobs(path: Path) -> list[tuple[str, str, list[SourceFile]]]:
    """一道浏览器题要在 Pyodide 里评测的 (文件名, 代码, 测试)；不是浏览器题或静态检查不过时为空。"""
    try:
        problem = load_problem(path)
    except ProblemError:
        return []
    if problem.runtime != "browser" or static_problems(problem):
        return []
    tests = problem.tests()
    files = [path / "solution.py", path / "starter.py", *problem.wrong_answers()]
    return [(f.name, f.read_text(encoding="utf-8"), tests) for f in files]


def pyodide_check(dirs: list[Path], timeout: float) -> PyodideCheck:
    """用 tools/web/judge_pyodide.mjs 在 Pyodide 里评测每道浏览器题的参考答案、starter 和错误答案。

    网页里的 Worker 跑的是 Pyodide 的 Python（3.14），和本地的 CPython 版本不同，
    参考答案要在两边都通过。
    没有 node 或 node_modules（没运行过 npm ci）时跳过并说明原因；CI 里不许跳过。
    """
    check = PyodideCheck()
    per_problem = {p.name: _pyodide_jobs(p) for p in dirs}
    per_problem = {name: jobs for name, jobs in per_problem.items() if jobs}
    if not per_problem:
        return check
    node = shutil.which("node")
    missing = ""
    if node is None:
        missing = "找不到 node（Node.js ≥ 18）"
    elif not PYODIDE_PACKAGE.is_file():
        missing = f"没有 {PYODIDE_PACKAGE.relative_to(REPO_DIR)}（先在仓库根目录运行 npm ci）"
    if missing:
        if _in_ci():
            for name in per_problem:
                check.errors[name] = [f"CI 里浏览器题必须在 Pyodide 里自检，但{missing}"]
        check.note = f"{'Pyodide 自检没能运行' if _in_ci() else '跳过 Pyodide 自检'}：{missing}"
        return check

    flat = [(name, job) for name, jobs in per_problem.items() for job in jobs]
    request = {
        "judge_core": str(JUDGE_CORE),
        "timeout_s": timeout,
        "jobs": [
            {"code": code, "tests": [asdict(t) for t in tests]} for _, (_, code, tests) in flat
        ],
    }
    detail = ""
    answer = None
    try:
        proc = subprocess.run(
            [node, str(PYODIDE_SCRIPT)],
            input=json.dumps(request, ensure_ascii=False),
            capture_output=True,
            text=True,
            encoding="utf-8",
            cwd=REPO_DIR,
            timeout=120 + len(flat) * (timeout + 5),
        )
        if proc.returncode == 0:
            answer = json.loads(proc.stdout)
        else:
            detail = f"退出码 {proc.returncode}：{(proc.stderr or proc.stdout).strip()[-1500:]}"
    except (subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        detail = str(exc)
    if answer is None:
        first = (detail.splitlines() or ["没有输出"])[0]
        for name in per_problem:
            check.errors[name] = [f"Pyodide 自检没能运行（{first}）"]
        check.note = f"Pyodide 自检没能运行：{detail}"
        return check

    check.python = answer["python"]
    check.load_ms = answer["load_ms"]
    results = iter(answer["results"])
    for name, jobs in per_problem.items():
        errors: list[str] = []
        reference = ""
        for filename, _, _ in jobs:
            r = next(results)
            check.grade_ms.append(r["grade_ms"])
            fraction = f"{r['passed']}/{r['total']}"
            if filename == "solution.py":
                reference = fraction
                if r["status"] == "fail":
                    failed = r["failed_tests"]
                    more = f" 等 {len(failed)} 个" if len(failed) > 3 else ""
                    errors.append(
                        f"Pyodide 里参考答案没有全部通过（fail）：{'、'.join(failed[:3])}{more}"
                    )
                elif r["status"] != "ok":
                    last = (r["error"].strip().splitlines() or [r["status"]])[-1]
                    errors.append(f"Pyodide 里参考答案没有全部通过（{r['status']}）：{last}")
            elif r["status"] == "ok":
                errors.append(f"Pyodide 里 {filename} 通过了全部测试，但它应当至少挂一个")
            elif r["status"] in ("load_error", "crash"):
                last = (r["error"].splitlines() or [r["status"]])[-1]
                errors.append(f"Pyodide 里 {filename} 无法加载或运行（{r['status']}）：{last}")
        others = len(jobs) - 1
        check.summaries[name] = f"Pyodide 参考答案 {reference}，其余 {others} 个" + (
            "都不过" if not errors else "见下"
        )
        if errors:
            check.errors[name] = errors
    return check


def _pyodide_line(check: PyodideCheck) -> str:
    if check.note:
        return check.note
    load = "、".join(f"{ms / 1000:.1f}" for ms in check.load_ms)
    total = sum(check.grade_ms) / 1000
    return (
        f"Pyodide 自检（Node）：Python {check.python}；加载 {load} 秒；"
        f"评测 {len(check.grade_ms)} 次共 {total:.2f} 秒，最慢 {max(check.grade_ms) / 1000:.2f} 秒"
    )


def self_check(problems_dir: Path, timeout: float, jobs: int, pyodide: bool = True) -> int:
    dirs = (
        [p for p in sorted(problems_dir.iterdir()) if p.is_dir()] if problems_dir.is_dir() else []
    )
    dirs = [p for p in dirs if not p.name.startswith((".", "_"))]
    print(f"自检 {len(dirs)} 道题（{problems_dir}，每次评测超时 {timeout:g} 秒）")
    numbers: dict[str, list[str]] = {}
    for p in dirs:
        numbers.setdefault(p.name[:3], []).append(p.name)
    with ThreadPoolExecutor(max_workers=max(1, jobs) + 1) as pool:
        # Pyodide 自检是一个 node 进程，和 CPython 的评测同时进行
        browser = pool.submit(pyodide_check, dirs, timeout) if pyodide else None
        results = list(pool.map(lambda p: check_problem(p, timeout), dirs))
        check = browser.result() if browser is not None else None
    for result in results:
        clash = [n for n in numbers[result.name[:3]] if n != result.name]
        if clash:
            result.ok = False
            result.errors.append(f"编号与 {', '.join(clash)} 重复")
        if check is not None and result.name in check.summaries:
            result.summary += f"；{check.summaries[result.name]}"
        if check is not None and result.name in check.errors:
            result.ok = False
            result.errors.extend(check.errors[result.name])
        print(f"{'ok' if result.ok else 'FAIL':<5} {result.name}  {result.summary}")
        for error in result.errors:
            print(f"      - {error}")
    if check is not None and (check.note or check.grade_ms):
        print(_pyodide_line(check))
    good = sum(r.ok for r in results)
    if not results:
        print("没有找到任何题目")
    print(f"{good} passed, {len(results) - good} failed")
    return 0 if results and good == len(results) else 1


# ---------------------------------------------------------------- 命令行


def list_problems(problems_dir: Path) -> int:
    try:
        problems = find_problems(problems_dir)
    except ProblemError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    if not problems:
        print("没有找到任何题目")
        return 0
    print("编号  章节      难度  运行环境  标题")
    for p in problems:
        chapter = p.chapter_label
        print(f"{p.number:03d}   {chapter:<8}  {p.difficulty}  {p.runtime:<8}  {p.title}")
    return 0


def judge_one(spec: str, candidate: Path, problems_dir: Path, timeout: float) -> int:
    try:
        problem = load_problem(resolve_problem(spec, problems_dir))
    except ProblemError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    if not candidate.is_file():
        print(f"错误：找不到要评测的文件 {candidate}", file=sys.stderr)
        return 2
    print(
        f"题目 {problem.name}：{problem.title}"
        f"（{problem.chapter_label} · {problem.difficulty} · {problem.runtime}）"
    )
    print(f"评测 {candidate}（超时 {timeout:g} 秒）")
    print()
    report = grade_file(problem, candidate, timeout)
    print(judge_core.format_report(report))
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="judge.py", description="手写 mini-sglang 练习题的本地评测。"
    )
    parser.add_argument("problem", nargs="?", help="题目编号（1、001）或目录名")
    parser.add_argument("candidate", nargs="?", type=Path, help="要评测的 .py 文件")
    parser.add_argument("--list", action="store_true", help="列出所有题目")
    parser.add_argument("--self-check", action="store_true", help="检查所有题目本身是否正确")
    parser.add_argument(
        "--timeout",
        type=float,
        help=f"每次评测的时限（秒），默认 {DEFAULT_TIMEOUT:g}；自检默认 {SELF_CHECK_TIMEOUT:g}",
    )
    parser.add_argument("--problems-dir", type=Path, default=PROBLEMS_DIR, help="题目目录")
    parser.add_argument(
        "--no-pyodide",
        action="store_true",
        help="自检时不在 Pyodide（Node）里再评测浏览器题",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="自检时的并行数")
    args = parser.parse_args(argv)

    if args.timeout is not None and args.timeout <= 0:
        parser.error("--timeout 必须是正数")
    if args.list:
        return list_problems(args.problems_dir)
    if args.self_check:
        timeout = args.timeout or SELF_CHECK_TIMEOUT
        return self_check(args.problems_dir, timeout, args.jobs, not args.no_pyodide)
    if args.problem is None or args.candidate is None:
        parser.error("需要给出题目编号和要评测的文件，例如：python practice/judge.py 1 answer.py")
    timeout = args.timeout or DEFAULT_TIMEOUT
    return judge_one(args.problem, args.candidate, args.problems_dir, timeout)


if __name__ == "__main__":
    sys.exit(main())
