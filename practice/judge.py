"""练习题的本地评测命令。

    python practice/judge.py 1 我的答案.py        # 评测一道题（编号可写 1、001 或目录名）
    python practice/judge.py --list               # 列出所有题目
    python practice/judge.py --self-check         # 自检：参考答案全过，starter 与 wrong_*.py 都不过
                                                  # （浏览器题另在 Node 的 Pyodide 里再评测一遍）

评测在沙箱子进程里进行（``sys.executable judge_sandbox.py``，设计见那个文件的说明）：
结果经一条签过名的管道传回来，这里逐条核对；超时、崩溃、结果对不上都判为失败，
结束时整个进程组一起杀掉，临时目录一定删除。时限只算测试阶段：启动解释器、导入 torch 不算。
需要 torch 的题（runtime: local）用的也是当前解释器，环境里有 torch 就能评测。
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import secrets
import selectors
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

PRACTICE_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(PRACTICE_DIR))

import judge_core  # noqa: E402 —— 需要先把 practice/ 放进 sys.path
import judge_sandbox  # noqa: E402
from judge_core import Outcome, Report, SourceFile  # noqa: E402

PROBLEMS_DIR = PRACTICE_DIR / "problems"
JUDGE_CORE = PRACTICE_DIR / "judge_core.py"
SANDBOX = PRACTICE_DIR / "judge_sandbox.py"
JUDGE_FILES = [PRACTICE_DIR / "judge.py", JUDGE_CORE, SANDBOX]
# 测试阶段的默认时限（秒）；题目可以在 front matter 里用 time_limit 另定。启动与导入 torch 不算在内
DEFAULT_TIMEOUT = 10.0
# 启动评测进程、导入测试要用的模块（torch 在很忙的 2 核机器上要十几秒）的时限
STARTUP_TIMEOUT = 120.0
# 自检验证的是题目本身对不对，不是快不快：机器很忙时（CI 里别的测试同时在跑）也不能因为慢而失败
SELF_CHECK_TIMEOUT = 60.0
MEMORY_MB = 2048  # 启动之后最多再用多少内存
FILE_MB = 64  # 写的单个文件最大多少
LOG_BYTES = 64 * 1024  # 直接写到标准输出/错误的内容最多读多少
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

    @property
    def time_limit(self) -> float:
        """测试阶段的时限（秒）：front matter 的 time_limit，没写就是 DEFAULT_TIMEOUT。"""
        return float(self.meta.get("time_limit") or DEFAULT_TIMEOUT)

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


@dataclass
class Limits:
    """一次本地评测的限额与沙箱开关。"""

    time_s: float = DEFAULT_TIMEOUT  # 测试阶段的时限：从子进程报告“准备好了”开始计
    startup_s: float = STARTUP_TIMEOUT  # 启动解释器、导入 torch 等的时限（不算进 time_s）
    memory_mb: int = MEMORY_MB  # 启动之后最多再用多少内存
    file_mb: int = FILE_MB  # 写的单个文件最大多少
    log_bytes: int = LOG_BYTES  # 直接写到标准输出/错误的内容最多读多少（开头、结尾各一半）
    landlock: bool = True  # 关掉只为测试“没有 Landlock 时”的那条防线
    seccomp: bool = True


class _Log:
    """子进程直接写到文件描述符 1、2 的内容：只留开头和结尾各 limit/2 字节，其余只计数。"""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[: max(0, len(self.tail) - self.half)]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if not self.tail:
            return head
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + tail
        skipped = self.total - len(self.head) - len(self.tail)
        return f"{head}\n……（中间省略 {skipped} 字节）……\n{tail}"


@dataclass
class _Run:
    """一次子进程评测看到的一切，最后由 _verdict 变成报告。"""

    expected: list[tuple[str, str, bool]]
    log: _Log
    started: bool = False  # 收到了 start：读者代码即将运行
    landlock: bool = False
    seccomp: bool = False
    sandbox: str = ""
    load: list[Any] | None = None
    outcomes: list[list[Any]] = field(default_factory=list)
    done: bool = False
    invalid: str = ""
    timeout: str = ""  # "startup" 或 "tests"
    exit_detail: str = ""
    startup_s: float = 0.0
    test_s: float = 0.0

    def take(self, message: list[Any]) -> None:
        """按协议接收一条已经验过签名的消息；不合协议就记为无效。"""
        kind, rest = message[0], message[1:]
        shape = [type(x) for x in rest]
        if kind == "invalid" and shape == [str]:
            self.invalid = rest[0]
        elif not self.started:
            if kind == "start" and shape == [bool, bool, str]:
                self.started = True
                self.landlock, self.seccomp, self.sandbox = rest
            else:
                self.invalid = f"第一条消息应当是 start，收到的是 {kind!r}"
        elif self.load is None:
            if kind == "load" and shape == [bool, str, str]:
                self.load = rest
            else:
                self.invalid = f"应当先报告候选代码是否加载成功，收到的是 {kind!r}"
        elif kind == "outcome" and shape == [str, str, bool, str, str]:
            index = len(self.outcomes)
            if not self.load[0] or index >= len(self.expected):
                self.invalid = f"多出来的测试结果 {rest[0]}::{rest[1]}"
            elif tuple(rest[:2]) != self.expected[index][:2]:
                want = "::".join(self.expected[index][:2])
                self.invalid = f"测试结果对不上：应当是 {want}，收到的是 {rest[0]}::{rest[1]}"
            else:
                self.outcomes.append(rest)
        elif kind == "done" and not rest:
            if self.load[0] and len(self.outcomes) != len(self.expected):
                self.invalid = (
                    f"只报告了 {len(self.outcomes)} 个测试的结果，应当是 {len(self.expected)} 个"
                )
            else:
                self.done = True
        else:
            self.invalid = f"不认识的消息 {kind!r}"


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # Linux 5.3+：进程退出时可读，又不会回收它
    except (AttributeError, OSError):
        return None


def _has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """子进程退出了没有；不回收它（回收之后它的进程组号可能被别的进程用上，killpg 就不安全了）。"""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (AttributeError, ChildProcessError, OSError):
        return proc.poll() is not None


def _read_some(fd: int) -> bytes | None:
    """非阻塞地读一块；暂时没有数据时返回 None，读到结尾返回 b""。"""
    try:
        return os.read(fd, 1 << 16)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


def _supervise(
    proc: subprocess.Popen[bytes], result_fd: int, request: bytes, key: bytes, run: _Run,
    limits: Limits,
) -> None:  # fmt: skip
    """一边把请求写给子进程，一边读它的输出和结果，直到它报告完毕、违规、退出或超时。"""
    assert proc.stdin is not None and proc.stdout is not None
    reader = judge_sandbox.FrameReader(key)
    stdin_fd, log_fd = proc.stdin.fileno(), proc.stdout.fileno()
    for fd in (stdin_fd, log_fd, result_fd):
        os.set_blocking(fd, False)
    pidfd = _pidfd(proc.pid)
    pending = memoryview(request)

    def take_results(data: bytes) -> None:
        try:
            for message in reader.feed(data):
                if run.done or run.invalid:
                    return
                was_started = run.started
                run.take(message)
                if run.started and not was_started:
                    now = time.monotonic()
                    run.startup_s = now - begin
                    deadline[0] = now + limits.time_s  # 从这里开始计时
        except judge_sandbox.ChannelError as exc:
            run.invalid = str(exc)

    begin = time.monotonic()
    deadline = [begin + limits.startup_s]
    with selectors.DefaultSelector() as selector:
        selector.register(stdin_fd, selectors.EVENT_WRITE, "stdin")
        selector.register(log_fd, selectors.EVENT_READ, "log")
        selector.register(result_fd, selectors.EVENT_READ, "result")
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ, "exit")
        try:
            exited = False
            while not (run.done or run.invalid or exited):
                left = deadline[0] - time.monotonic()
                if left <= 0:
                    run.timeout = "tests" if run.started else "startup"
                    break
                for item, _ in selector.select(left if pidfd is not None else min(left, 0.05)):
                    if item.data == "stdin":
                        try:
                            pending = pending[os.write(stdin_fd, pending[: 1 << 16]) :]
                        except BlockingIOError:
                            pass
                        except OSError:
                            pending = pending[:0]  # 子进程已经不读了
                        if not pending:
                            selector.unregister(stdin_fd)
                            proc.stdin.close()
                    elif item.data == "log":
                        data = _read_some(log_fd)
                        if data == b"":
                            selector.unregister(log_fd)
                        elif data:
                            run.log.add(data)
                    elif item.data == "result":
                        data = _read_some(result_fd)
                        if data == b"":
                            selector.unregister(result_fd)
                        elif data:
                            take_results(data)
                    elif item.data == "exit":
                        exited = True
                if pidfd is None and not exited:
                    exited = _has_exited(proc)
            if exited:
                # 子进程退出前写下的结果和输出还在管道里：读完（孙进程可能还开着写端，所以不等 EOF）
                while not (run.done or run.invalid):
                    data = _read_some(result_fd)
                    if not data:
                        break
                    take_results(data)
                for _ in range(64):
                    data = _read_some(log_fd)
                    if not data:
                        break
                    run.log.add(data)
        finally:
            if pidfd is not None:
                os.close(pidfd)
    if run.started:
        run.test_s = time.monotonic() - begin - run.startup_s


def _kill_group(proc: subprocess.Popen[bytes]) -> str:
    """杀掉子进程所在的整个进程组，回收子进程，返回它的退出情况。

    子进程是会话首进程，进程组号就是它的 pid；先 killpg 再回收，这个号就不会已经被别的进程用上。
    seccomp 不许读者代码 setsid/setpgid，它启动的进程都留在这个组里，一起被杀掉。
    """
    if hasattr(os, "killpg"):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    else:
        proc.kill()
    code = proc.wait()
    if code < 0:
        try:
            return f"被信号 {signal.Signals(-code).name} 结束"
        except ValueError:
            return f"被信号 {-code} 结束"
    return f"退出码 {code}"


def _kill_strays(work: str, passes: int) -> None:
    """按环境变量 TMPDIR 找还指着这次临时目录的进程，全部杀掉（只在有 /proc 的系统上）。

    读者代码启动的进程都继承这个变量，即使它们躲开了 killpg（没有 seccomp 时可以 setsid 离开
    进程组），这里也能找到；只有换掉了整个环境再 exec 的进程找不到。正在 exec 的进程一时读不到
    环境变量，所以要多找几遍：连续 3 遍都没找到才停，最多 passes 遍。
    """
    marker = f"TMPDIR={work}\0".encode()
    quiet = 0
    for _ in range(passes):
        found = 0
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if marker in (proc / "environ").read_bytes():
                    os.kill(int(proc.name), signal.SIGKILL)
                    found += 1
            except (OSError, ValueError):
                continue
        quiet = 0 if found else quiet + 1
        if quiet >= 3:
            break
        time.sleep(0.02)


def _remove_tree(path: str) -> None:
    """删掉临时目录；读者代码可能改掉了里面的权限，删不掉时先把权限改回来再试。"""

    def retry(func: Any, target: str, *_: Any) -> None:
        try:
            os.chmod(os.path.dirname(target), 0o700)
            if os.path.isdir(target) and not os.path.islink(target):
                os.chmod(target, 0o700)
                shutil.rmtree(target, ignore_errors=True)
            else:
                func(target)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


def _snapshot(paths: list[Path]) -> dict[Path, bytes]:
    """受保护的文件的内容（目录里除 __pycache__ 以外的所有文件）。"""
    found: dict[Path, bytes] = {}
    for path in paths:
        files = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for f in files:
            if "__pycache__" in f.parts or f.is_symlink() or not f.is_file():
                continue
            try:
                found[f] = f.read_bytes()
            except OSError:
                pass
    return found


def _restore(before: dict[Path, bytes], paths: list[Path]) -> list[str]:
    """把评测期间被改动、删除的受保护文件改回去；返回所有变化（新出现的文件只报告不删除）。"""
    changed = []
    for f, data in before.items():
        try:
            same = not f.is_symlink() and f.read_bytes() == data
        except OSError:
            same = False
        if same:
            continue
        changed.append(str(f))
        try:
            if f.is_symlink() or f.is_file():
                f.unlink()
            elif f.is_dir():
                shutil.rmtree(f)
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
        except OSError as exc:
            changed[-1] += f"（没能恢复：{exc}）"
    changed += [f"{f}（新出现的）" for f in _snapshot(paths) if f not in before]
    return changed


def preload_modules(tests: list[SourceFile]) -> list[str]:
    """测试文件导入的第三方模块（完整的点分名字）：子进程先导入它们，导入的时间不算进时限。"""
    names: list[str] = []
    for test in tests:
        try:
            tree = ast.parse(test.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found = [node.module]
            else:
                continue
            for name in found:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == judge_core.CANDIDATE_MODULE:
                    continue
                if name not in names:
                    names.append(name)
    return names


def _child_env(work: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PWD", "OLDPWD")}
    # HOME 换成临时目录后，pip install --user 装的包（比如 torch）要靠 PYTHONUSERBASE 才找得到
    env.setdefault("PYTHONUSERBASE", site.getuserbase())
    env.update(HOME=work, TMPDIR=work, PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
    return env


def _verdict(run: _Run, tests: list[SourceFile], limits: Limits, changed: list[str]) -> Report:
    if changed:
        listing = "\n".join(f"  {c}" for c in changed[:20])
        report = judge_core.invalid_report(
            tests, f"评测期间这些受保护的文件被改动了（已经改回去）：\n{listing}"
        )
    elif run.invalid:
        report = judge_core.invalid_report(tests, run.invalid)
    elif run.done and run.load is not None and not run.load[0]:
        report = Report(
            status="load_error",
            outcomes=judge_core._all_failed(tests, "候选代码加载失败，测试没有运行"),
            error=run.load[1],
            output=run.load[2],
        )
    elif run.done:
        outcomes = [
            Outcome(file, name, passed, message, hidden, output)
            for (file, name, passed, message, output), (_, _, hidden) in zip(
                run.outcomes, run.expected
            )
        ]
        ok = bool(outcomes) and all(o.passed for o in outcomes)
        report = Report(
            status="ok" if ok else "fail",
            outcomes=outcomes,
            error="" if outcomes else "没有找到任何测试",
            output=run.load[2] if run.load else "",
        )
    elif run.timeout == "startup":
        report = Report(
            status="timeout",
            outcomes=judge_core._all_failed(tests, "超时"),
            error=(
                f"超时：评测进程 {limits.startup_s:g} 秒内没有准备好（启动解释器、导入 torch 等），"
                "所有测试记为失败。"
            ),
        )
    elif run.timeout:
        report = judge_core.timeout_report(tests, limits.time_s)
    else:
        detail = run.exit_detail
        if run.started:
            detail += "，没有报告完整的结果（读者代码结束了进程？）"
        log = run.log.text().strip()
        report = judge_core.crash_report(tests, detail + (f"\n{log[-2000:]}" if log else ""))
    if run.log.truncated:
        note = (
            f"注意：评测进程绕过 print 的捕获直接写了 {run.log.total} 字节的输出，"
            f"超过上限 {limits.log_bytes} 字节，只读了开头和结尾各 {run.log.half} 字节。"
        )
        report.error = f"{report.error}\n{note}".strip()
    return report


def grade_source(
    code: str,
    tests: list[SourceFile],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    limits: Limits | None = None,
    guard: list[Path] | None = None,
    details: dict[str, Any] | None = None,
) -> Report:
    """在沙箱子进程里评测一段代码（见 judge_sandbox.py）。

    超时、崩溃、结果不可信时，所有测试记为失败。timeout 是测试阶段的时限（覆盖 limits 的 time_s）。
    guard 是评测期间不许改动的文件或目录：子进程启用了 Landlock 时它根本写不了；
    没启用时评测后逐个核对，被改了就改回去并判为无效。
    details 不为 None 时填入沙箱状态、启动与测试用时、输出字节数，给自检和测试用。
    """
    limits = replace(limits or Limits(), time_s=timeout)
    guarded = [*JUDGE_FILES, *(guard or [])]
    before = _snapshot(guarded)
    key = secrets.token_bytes(32)
    request = judge_sandbox.encode_request(
        {
            "key": key.hex(),
            "code": code,
            "tests": [asdict(t) for t in tests],
            "preload": preload_modules(tests),
            "memory_mb": limits.memory_mb,
            "file_mb": limits.file_mb,
            "landlock": limits.landlock,
            "seccomp": limits.seccomp,
        }
    )
    run = _Run(expected=judge_core.planned_tests(tests), log=_Log(limits.log_bytes))
    work = tempfile.mkdtemp(prefix="minisgl-judge-")
    result_fd, write_fd = os.pipe()
    proc = None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-X", "utf8", "-B", str(SANDBOX), str(write_fd)],
            cwd=work,  # 读者代码写的文件都落在临时目录里，评测完一起删掉
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            env=_child_env(work),
            start_new_session=True,  # 自己一个会话、一个进程组：结束时整组杀掉
        )
        os.close(write_fd)
        write_fd = -1
        _supervise(proc, result_fd, request, key, run, limits)
    except OSError as exc:
        run.exit_detail = f"启动评测进程失败：{exc}"
    finally:
        if proc is not None:
            run.exit_detail = _kill_group(proc)
            # 有 seccomp 时读者代码离不开进程组，killpg 已经够了，这里只找一遍
            _kill_strays(work, 1 if run.seccomp else 20)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        for fd in (result_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        _remove_tree(work)
    # 子进程启用了 Landlock 就写不了这些文件，此时它们的变化只可能来自别人（比如正在编辑的作者），
    # 不能改回去；没启用时才核对
    changed = _restore(before, guarded) if run.started and not run.landlock else []
    if details is not None:
        details.update(
            sandbox=run.sandbox,
            landlock=run.landlock,
            seccomp=run.seccomp,
            startup_s=run.startup_s,
            test_s=run.test_s,
            log_bytes=run.log.total,
        )
    return _verdict(run, tests, limits, changed)


def grade_file(problem: Problem, candidate: Path, timeout: float | None = None) -> Report:
    limit = problem.time_limit if timeout is None else timeout
    code = candidate.read_text(encoding="utf-8")
    return grade_source(code, problem.tests(), limit, guard=[problem.dir])


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


def check_problem(
    path: Path, timeout: float | None = None, limits: Limits | None = None
) -> CheckResult:
    """自检一道题：目录合规；参考答案全过；starter 和每个 wrong_*.py 都因为测试失败而挂。

    timeout 为 None 时用 max(题目的时限, SELF_CHECK_TIMEOUT)：自检查的是题目对不对，
    机器很忙时也不该因为慢而失败。错误答案超时、崩溃、无法加载都算题目的问题：
    它应当是被测试抓住的，而不是碰巧跑不完。
    """
    try:
        problem = load_problem(path)
    except ProblemError as exc:
        return CheckResult(path.name, False, "目录不合规", [str(exc)])
    errors = static_problems(problem)
    if errors:
        return CheckResult(path.name, False, "静态检查未通过", errors)

    tests = problem.tests()
    limit = max(problem.time_limit, SELF_CHECK_TIMEOUT) if timeout is None else timeout
    parts = []

    def grade(file: Path, details: dict[str, Any] | None = None) -> Report:
        code = file.read_text(encoding="utf-8")
        return grade_source(code, tests, limit, limits=limits, guard=[path], details=details)

    details: dict[str, Any] = {}
    reference = grade(path / "solution.py", details)
    parts.append(f"参考答案 {_fraction(reference)}")
    if not reference.ok:
        failed = [o.id for o in reference.outcomes if not o.passed]
        reason = reference.error.splitlines()[0] if reference.error else "、".join(failed)
        errors.append(f"参考答案没有全部通过（{reference.status}）：{reason}")
    elif details.get("test_s", 0.0) > problem.time_limit:
        parts[-1] += (
            f"（测试用了 {details['test_s']:.1f} 秒，超过题目时限 {problem.time_limit:g} 秒）"
        )

    for path_ in [path / "starter.py", *problem.wrong_answers()]:
        report = grade(path_)
        only_hidden = report.ok is False and all(o.passed for o in report.outcomes if not o.hidden)
        parts.append(
            f"{path_.name} {_fraction(report)}" + ("（仅隐藏测试不过）" if only_hidden else "")
        )
        if report.ok:
            errors.append(f"{path_.name} 通过了全部测试，但它应当至少挂一个")
        elif report.status == "timeout":
            errors.append(
                f"{path_.name} 超时：错误答案应当被测试的断言抓住，而不是跑不完"
                "（超时不说明测试能发现这个错误）"
            )
        elif report.status in ("load_error", "crash", "invalid"):
            first = report.error.strip().splitlines()[-1] if report.error else report.status
            errors.append(f"{path_.name} 无法加载或运行（{report.status}）：{first}")
    return CheckResult(path.name, not errors, "；".join(parts), errors)


# ---------------------------------------------------------------- Pyodide 自检


@dataclass
class PyodideCheck:
    """浏览器题在 Pyodide（Node）里的自检结果。"""

    python: str = ""
    snapshot: bool = False  # 新解释器是不是从内存快照恢复的（否则每次完整加载）
    load_ms: list[int] = field(default_factory=list)  # 每次评测准备新解释器的时间
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


def pyodide_missing() -> str:
    """在 Node 的 Pyodide 里评测还缺什么；什么都不缺时返回空串。"""
    if shutil.which("node") is None:
        return "找不到 node（Node.js ≥ 18）"
    if not PYODIDE_PACKAGE.is_file():
        return f"没有 {PYODIDE_PACKAGE.relative_to(REPO_DIR)}（先在仓库根目录运行 npm ci）"
    return ""


def pyodide_check(dirs: list[Path], timeout: float, threads: int = 1) -> PyodideCheck:
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
    missing = pyodide_missing()
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
        "threads": max(1, threads),
        "jobs": [
            {"code": code, "tests": [asdict(t) for t in tests]} for _, (_, code, tests) in flat
        ],
    }
    detail = ""
    answer = None
    try:
        proc = subprocess.run(
            ["node", str(PYODIDE_SCRIPT)],
            input=json.dumps(request, ensure_ascii=False),
            capture_output=True,
            text=True,
            encoding="utf-8",
            cwd=REPO_DIR,
            timeout=180 + len(flat) * (timeout + 5),
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
    check.snapshot = bool(answer.get("snapshot"))
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
            elif r["status"] == "timeout":
                errors.append(f"Pyodide 里 {filename} 超时：错误答案应当被测试的断言抓住")
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
    how = "从内存快照恢复" if check.snapshot else "完整加载"
    load = sum(check.load_ms) / max(1, len(check.load_ms)) / 1000
    total = sum(check.grade_ms) / 1000
    return (
        f"Pyodide 自检（Node）：Python {check.python}；"
        f"每次评测一个新解释器（{how}，平均 {load:.2f} 秒）；"
        f"评测 {len(check.grade_ms)} 次共 {total:.2f} 秒，最慢 {max(check.grade_ms) / 1000:.2f} 秒"
    )


def self_check(problems_dir: Path, timeout: float | None, jobs: int, pyodide: bool = True) -> int:
    began = time.monotonic()
    dirs = (
        [p for p in sorted(problems_dir.iterdir()) if p.is_dir()] if problems_dir.is_dir() else []
    )
    dirs = [p for p in dirs if not p.name.startswith((".", "_"))]
    limit = f"{timeout:g} 秒" if timeout else f"题目时限与 {SELF_CHECK_TIMEOUT:g} 秒中较大的一个"
    print(f"自检 {len(dirs)} 道题（{problems_dir}，测试阶段的时限：{limit}，启动不计）")
    numbers: dict[str, list[str]] = {}
    for p in dirs:
        numbers.setdefault(p.name[:3], []).append(p.name)
    with ThreadPoolExecutor(max_workers=max(1, jobs) + 1) as pool:
        # Pyodide 自检是一个 node 进程（最多 4 个线程），和 CPython 的评测同时进行
        threads = min(max(1, jobs), 4)
        limit = timeout or SELF_CHECK_TIMEOUT
        browser = pool.submit(pyodide_check, dirs, limit, threads) if pyodide else None
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
    print(f"用时 {time.monotonic() - began:.1f} 秒")
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


def judge_one(
    spec: str,
    candidate: Path,
    problems_dir: Path,
    timeout: float | None,
    memory_mb: int = MEMORY_MB,
) -> int:
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
    limit = problem.time_limit if timeout is None else timeout
    print(f"评测 {candidate}（时限 {limit:g} 秒，从测试开始计，启动解释器和导入 torch 不算）")
    code = candidate.read_text(encoding="utf-8", errors="replace")
    limits = Limits(memory_mb=memory_mb)
    details: dict[str, Any] = {}
    report = grade_source(
        code, problem.tests(), limit, limits=limits, guard=[problem.dir], details=details
    )
    if details.get("sandbox"):
        print(f"沙箱：{details['sandbox']}")
    print()
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
        help=(
            f"测试阶段的时限（秒），不含启动和导入 torch；默认用题目的 time_limit（没写是 "
            f"{DEFAULT_TIMEOUT:g}），自检默认取它与 {SELF_CHECK_TIMEOUT:g} 中较大的"
        ),
    )
    parser.add_argument(
        "--memory",
        type=int,
        default=MEMORY_MB,
        help=f"启动之后最多再用多少内存（MiB），默认 {MEMORY_MB}",
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
    if args.memory <= 0:
        parser.error("--memory 必须是正数")
    if args.list:
        return list_problems(args.problems_dir)
    if args.self_check:
        return self_check(args.problems_dir, args.timeout, args.jobs, not args.no_pyodide)
    if args.problem is None or args.candidate is None:
        parser.error("需要给出题目编号和要评测的文件，例如：python practice/judge.py 1 answer.py")
    return judge_one(args.problem, args.candidate, args.problems_dir, args.timeout, args.memory)


if __name__ == "__main__":
    sys.exit(main())
