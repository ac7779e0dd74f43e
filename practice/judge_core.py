"""练习题评测核心：只用标准库。

同一份文件有两种用法，所以这里不能用 subprocess、线程、信号或任何第三方包：

- 本地：``judge.py`` 启动子进程 ``judge_sandbox.py``，它在沙箱里调用这里的 ``grade``，
  进度经审计事件（见 ``PROGRESS_EVENT``）签名后写进结果管道；超时、核对结果由父进程负责；
- 浏览器：Web Worker 里的 Pyodide ``import judge_core`` 后调用 ``run_json``，
  超时由页面负责（``worker.terminate()``）。

读者的代码以模块 ``solution`` 的身份加载；测试文件是普通的 pytest 风格文件
（``from solution import f`` + 若干 ``def test_*(): assert ...``），在不装 pytest 的环境里也能跑。
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import linecache
import sys
import traceback
import types
from dataclasses import asdict, dataclass, field, replace
from typing import Any

CANDIDATE_MODULE = "solution"
CANDIDATE_FILENAME = "solution.py"
VISIBLE_TESTS = "test_visible.py"
HIDDEN_TESTS = "test_hidden.py"

MAX_OUTPUT = 4000  # 每个测试最多保留多少字符的输出：死循环里 print 也不会撑爆内存
MAX_MESSAGE = 3000
MAX_REPR = 300

# 状态：ok 全部通过；fail 有测试失败；load_error 候选代码加载失败；
# timeout 超时（由外层判定）；crash 评测进程异常退出（由外层判定）；
# invalid 评测结果不可信（只在本地评测出现：通道上的数据对不上、评测器或仓库里的文件被改动）
STATUSES = ("ok", "fail", "load_error", "timeout", "crash", "invalid")

# 题目 statement.md 的 front matter（另有可选的 time_limit：测试阶段的时限，秒）
DIFFICULTIES = ("简单", "中等", "困难")
RUNTIMES = ("browser", "local")
REQUIRED_META = ("title", "chapter", "difficulty", "runtime")
APPENDIX = "appendix"  # 附录（书末讲演示模型的那一页）的练习题：chapter: appendix

_FMT_NAME = "_judge_compare_message_"  # 注入测试命名空间的断言格式化函数名


@dataclass
class SourceFile:
    """一个测试文件：文件名、源码、是否为隐藏测试。"""

    name: str
    source: str
    hidden: bool = False


@dataclass
class Outcome:
    """一个测试函数的结果。"""

    file: str
    name: str
    passed: bool
    message: str = ""
    hidden: bool = False
    output: str = ""  # 这个测试运行期间读者代码 print 出的内容

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"


@dataclass
class Report:
    """一次评测的全部结果。error 只在整体失败（加载失败、超时、崩溃）时出现一次。"""

    status: str
    outcomes: list[Outcome] = field(default_factory=list)
    error: str = ""
    output: str = ""  # 加载候选代码时的输出

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def failed(self) -> int:
        return len(self.outcomes) - self.passed

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        outcomes = [Outcome(**o) for o in data.get("outcomes", [])]
        return cls(
            status=data["status"],
            outcomes=outcomes,
            error=data.get("error", ""),
            output=data.get("output", ""),
        )

    def redacted(self) -> Report:
        """隐藏测试只保留名字与通过与否（给浏览器用：页面里不该出现隐藏测试的细节）。"""
        outcomes = [replace(o, message="", output="") if o.hidden else o for o in self.outcomes]
        return replace(self, outcomes=outcomes)


# ---------------------------------------------------------------- 测试文件的解析


def list_tests(source: str) -> list[str]:
    """按定义顺序列出模块顶层的 ``def test_*``（同名只算一次）。源码有语法错误时抛 SyntaxError。

    用 ast 而不是执行后去命名空间里找：候选代码加载失败或超时的时候，也要知道有哪些测试记为失败。
    """
    names: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            if node.name not in names:
                names.append(node.name)
    return names


class _AssertRewriter(ast.NodeTransformer):
    """把 ``assert a == b`` 改写成失败时能同时报出两边取值的形式（没有 pytest 时的简易替代）。"""

    def __init__(self, source: str) -> None:
        self.source = source

    def visit_Assert(self, node: ast.Assert) -> Any:
        test = node.test
        if node.msg is not None or not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return node
        text = ast.get_source_segment(self.source, test) or "..."
        left = "_judge_left_"
        right = "_judge_right_"
        message = ast.Call(
            func=ast.Name(_FMT_NAME, ast.Load()),
            args=[ast.Constant(text), ast.Name(left, ast.Load()), ast.Name(right, ast.Load())],
            keywords=[],
        )
        new_nodes = [
            ast.Assign([ast.Name(left, ast.Store())], test.left),
            ast.Assign([ast.Name(right, ast.Store())], test.comparators[0]),
            ast.Assert(
                ast.Compare(ast.Name(left, ast.Load()), test.ops, [ast.Name(right, ast.Load())]),
                message,
            ),
        ]
        return [ast.copy_location(n, node) for n in new_nodes]


def _safe_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # 读者的 __repr__ 也可能出错
        text = f"<repr 出错：{type(exc).__name__}>"
    if len(text) > MAX_REPR:
        text = text[:MAX_REPR] + "……"
    return text


def _compare_message(text: str, left: object, right: object) -> str:
    return f"assert {text}\n  左边：{_safe_repr(left)}\n  右边：{_safe_repr(right)}"


def _compile_tests(test: SourceFile) -> types.CodeType:
    tree = _AssertRewriter(test.source).visit(ast.parse(test.source, test.name))
    ast.fix_missing_locations(tree)
    return compile(tree, test.name, "exec", dont_inherit=True)


# ---------------------------------------------------------------- 输出捕获与状态恢复


class _Capture(io.TextIOBase):
    """有上限的 StringIO：超出 MAX_OUTPUT 的部分只计数不保存。"""

    def __init__(self, limit: int = MAX_OUTPUT) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._size = 0
        self._dropped = 0
        self._limit = limit

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() 需要 str，得到 {type(s).__name__}")
        room = self._limit - self._size
        if room > 0:
            self._parts.append(s[:room])
            self._size += min(len(s), room)
        self._dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self._dropped:
            text += f"\n……（还有 {self._dropped} 个字符没有显示）"
        return text


@dataclass
class _SavedState:
    stdin: Any
    recursion_limit: int
    modules: dict[str, Any]
    path: list[str]
    builtins: dict[str, Any]
    linecache: dict[str, Any]


def _save_state() -> _SavedState:
    return _SavedState(
        stdin=sys.stdin,
        recursion_limit=sys.getrecursionlimit(),
        modules=dict(sys.modules),
        path=list(sys.path),
        builtins=dict(builtins.__dict__),
        linecache=dict(linecache.cache),
    )


def _is_file_backed(module: object) -> bool:
    spec = getattr(module, "__spec__", None)
    return spec is not None and spec.origin is not None


def _restore_state(saved: _SavedState, own_modules: list[str]) -> None:
    """撤销一次评测对解释器的改动。浏览器里一个页面复用同一个解释器，不撤销就会串味。"""
    sys.stdin = saved.stdin
    sys.setrecursionlimit(saved.recursion_limit)
    sys.path[:] = saved.path
    for name in list(sys.modules):
        if name in saved.modules:
            continue
        # 评测自己放进去的模块一定删掉；读者临时造的模块（没有来源文件）也删掉。
        # 从磁盘导入的库（如 torch）留着：重复导入扩展模块反而会出问题。
        if name in own_modules or not _is_file_backed(sys.modules[name]):
            del sys.modules[name]
    for name, module in saved.modules.items():  # 读者替换或删除的模块也放回去
        if sys.modules.get(name) is not module:
            sys.modules[name] = module
    current = builtins.__dict__
    for key in [k for k in current if k not in saved.builtins]:
        del current[key]
    for key, value in saved.builtins.items():
        if current.get(key) is not value:
            current[key] = value
    linecache.cache.clear()
    linecache.cache.update(saved.linecache)


def _remember_source(filename: str, source: str) -> None:
    # 让 traceback 能显示出错那一行的源码（这些源码不在磁盘上）
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)


# ---------------------------------------------------------------- 异常格式化


def _truncate(text: str, limit: int = MAX_MESSAGE) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "\n……（信息太长，已截断）"


def _format_exception(exc: BaseException, files: set[str]) -> str:
    """只保留读者代码和测试文件里的栈帧，评测框架自身的栈帧对读者没有用。"""
    tb = traceback.TracebackException.from_exception(exc)
    tb.stack = traceback.StackSummary.from_list([f for f in tb.stack if f.filename in files])
    return _truncate("".join(tb.format(chain=False)))


def _assertion_message(exc: AssertionError, test_file: str, files: set[str]) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and frames[-1].filename == test_file:
        # 断言直接写在测试里：有信息就用信息，否则显示那一行 assert
        text = str(exc)
        if not text:
            line = (frames[-1].line or "").strip()
            text = f"断言失败：{line}" if line else "断言失败"
        return _truncate(text)
    # 断言来自读者的代码：按普通异常显示位置
    return _format_exception(exc, files)


# ---------------------------------------------------------------- 评测

# 评测进度的审计事件（sys.audit）。浏览器里没有人监听，这些调用什么也不做；本地评测的子进程
# （judge_sandbox.py）装了一个审计钩子：它只认 _grade 这一帧发出的进度事件，签名后写进结果管道，
# 别处（比如读者代码自己）发出的进度事件一律判为作弊。
PROGRESS_EVENT = "minisgl.judge.progress"

# 一个测试文件的评测计划：(文件名, 是否隐藏, 源码, 测试名, 错误, 编译好的代码, 每个测试的代码对象)。
# 全用元组和字符串：加载读者代码之前就定下来，之后谁也改不了。
_PlannedFile = tuple[
    str, bool, str, tuple[str, ...], str, "types.CodeType | None", tuple["types.CodeType", ...]
]


def grade(code: str, tests: list[SourceFile]) -> Report:
    """加载候选代码为模块 ``solution``，依次运行每个测试文件里的 ``test_*``，返回结构化结果。

    评测结束后 ``solution`` 与测试模块都会从 ``sys.modules`` 里移除，
    ``builtins``、递归深度、``sys.path``、``sys.stdin`` 也会复原，同一进程里多次评测互不影响。
    """
    saved = _save_state()
    own_modules = [CANDIDATE_MODULE] + [_module_name(t.name) for t in tests]
    try:
        return _grade(code, tests)
    finally:
        _restore_state(saved, own_modules)


def _module_name(filename: str) -> str:
    return filename[:-3] if filename.endswith(".py") else filename


def _plan(tests: list[SourceFile]) -> tuple[_PlannedFile, ...]:
    """在运行任何读者代码之前解析、编译每个测试文件，记下每个 ``test_*`` 最后一次定义的代码对象。

    全用元组和字符串：之后谁也改不了。
    """
    plan: list[_PlannedFile] = []
    for test in tests:
        try:
            names = tuple(list_tests(test.source))
            code = _compile_tests(test)
        except (SyntaxError, ValueError) as exc:
            error = _format_exception(exc, {test.name})
            plan.append((test.name, test.hidden, test.source, (), error, None, ()))
            continue
        defined = {c.co_name: c for c in code.co_consts if isinstance(c, types.CodeType)}
        error = "" if names else f"{test.name} 里没有 test_* 函数"
        codes = tuple(defined[name] for name in names)
        plan.append((test.name, test.hidden, test.source, names, error, code, codes))
    return tuple(plan)


def planned_tests(tests: list[SourceFile]) -> list[tuple[str, str, bool]]:
    """评测会逐个报告的 (文件, 测试名, 是否隐藏)，按报告的顺序。

    测试文件有语法错误或者没有 ``test_*`` 函数时，这个文件只记一项 ``<load>``。
    本地评测的父进程用它核对子进程发回来的结果：多一项、少一项、顺序不对都不行。
    """
    return [
        (file, name, hidden)
        for file, hidden, _, names, _, _, _ in _plan(tests)
        for name in names or ("<load>",)
    ]


def _failed_from_plan(plan: tuple[_PlannedFile, ...], message: str) -> list[Outcome]:
    outcomes = []
    for file, hidden, _, names, error, _, _ in plan:
        for name in names or ("<load>",):
            outcomes.append(Outcome(file, name, False, error or message, hidden))
    return outcomes


def _all_failed(tests: list[SourceFile], message: str) -> list[Outcome]:
    return _failed_from_plan(_plan(tests), message)


def _load_message(exc: BaseException, files: set[str]) -> str:
    text = _format_exception(exc, files)
    if isinstance(exc, MemoryError):
        text += "\n（内存不够用：评测给每次运行设了内存上限，代码申请的内存太多了）"
    return text


def _grade(code: str, tests: list[SourceFile]) -> Report:
    """评测的主体。所有进度事件都从这一帧发出（见 PROGRESS_EVENT）。

    读者代码和测试跑在同一个解释器里，所以这里多做了几件事，让它改不动评测本身：

    - 测试在加载读者代码之前就解析、编译好，记下每个 ``test_*`` 的代码对象；之后再改测试源码没有用；
    - 用到的内置函数和类型在加载读者代码之前存进局部变量，读者换掉 ``builtins`` 或本模块的全局名字
      影响不到判定；重定向输出不用 ``with``（换掉的 ``__exit__`` 可以吞掉断言失败）；
    - 每个测试调用前核对它还是测试文件里定义的那个函数，调用后核对测试模块里的函数、类和模块
      没有被换掉，换了就判失败。
    """
    audit, run, isinstance_, zip_, sys_, vars_ = sys.audit, exec, isinstance, zip, sys, vars
    function_type, watched_types = types.FunctionType, (types.FunctionType, type, types.ModuleType)
    plan = _plan(tests)
    files = {CANDIDATE_FILENAME} | {entry[0] for entry in plan}
    for file, _, source, _, _, _, _ in plan:
        _remember_source(file, source)
    _remember_source(CANDIDATE_FILENAME, code)
    sys_.stdin = io.StringIO("")  # input() 立刻得到 EOFError，而不是卡住
    stdout, stderr = sys_.stdout, sys_.stderr

    module = types.ModuleType(CANDIDATE_MODULE)
    module.__file__ = CANDIDATE_FILENAME
    # 先放进 sys.modules 再执行：dataclass 等会在定义时按模块名回查 sys.modules
    sys_.modules[CANDIDATE_MODULE] = module
    load_output = _Capture()
    load_error = ""
    audit(PROGRESS_EVENT, "start")
    sys_.stdout = sys_.stderr = load_output
    try:
        run(compile(code, CANDIDATE_FILENAME, "exec", dont_inherit=True), module.__dict__)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        load_error = _load_message(exc, files) or type(exc).__name__
    finally:
        sys_.stdout, sys_.stderr = stdout, stderr
    output = load_output.getvalue()
    if load_error:
        audit(PROGRESS_EVENT, "load", False, load_error, output)
        audit(PROGRESS_EVENT, "done")
        outcomes = _failed_from_plan(plan, "候选代码加载失败，测试没有运行")
        return Report(status="load_error", outcomes=outcomes, error=load_error, output=output)
    audit(PROGRESS_EVENT, "load", True, "", output)

    outcomes: list[Outcome] = []
    for file, hidden, _, names, error, test_code, codes in plan:
        if test_code is None or not names:
            audit(PROGRESS_EVENT, "outcome", file, "<load>", False, error, "")
            outcomes.append(Outcome(file, "<load>", False, error, hidden))
            continue
        test_module = types.ModuleType(_module_name(file))
        test_module.__file__ = file
        namespace = test_module.__dict__
        namespace[_FMT_NAME] = _compare_message
        sys_.modules[test_module.__name__] = test_module
        file_error = ""
        sink = _Capture()
        sys_.stdout = sys_.stderr = sink
        try:
            run(test_code, namespace)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            file_error = f"测试文件 {file} 无法加载：\n" + _format_exception(exc, files)
        finally:
            sys_.stdout, sys_.stderr = stdout, stderr
        functions = tuple(namespace.get(name) for name in names)
        # 测试模块里的函数、类、模块，以及它自己定义的类里的方法：之后逐个核对身份和 __code__
        watched = tuple((k, v) for k, v in namespace.items() if isinstance_(v, watched_types))
        members = tuple(
            (cls, attr, member, member.__code__)
            for _, cls in watched
            if isinstance_(cls, type) and cls.__module__ == test_module.__name__
            for attr, member in vars_(cls).items()
            if isinstance_(member, function_type)
        )
        helpers = tuple((v, v.__code__) for _, v in watched if isinstance_(v, function_type))
        for name, expected, func in zip_(names, codes, functions):
            passed, message = False, ""
            sink = _Capture()
            if file_error:
                message = file_error
            elif not (
                isinstance_(func, function_type)
                and func.__code__ is expected
                and func.__globals__ is namespace
            ):
                message = f"{name} 已经不是测试文件里定义的那个函数（被换掉了），不算通过"
            else:
                sys_.stdout = sys_.stderr = sink
                try:
                    func()
                except KeyboardInterrupt:
                    raise
                except AssertionError as exc:
                    message = _assertion_message(exc, file, files)
                except BaseException as exc:
                    message = _format_exception(exc, files)
                else:
                    passed = True
                finally:
                    sys_.stdout, sys_.stderr = stdout, stderr
            replaced = []
            for key, value in watched:
                if namespace.get(key, watched) is not value:
                    replaced.append(key)
            for func, func_code in helpers:
                if func.__code__ is not func_code:
                    replaced.append(f"{func.__name__} 的代码")
            for cls, attr, member, member_code in members:
                if vars_(cls).get(attr) is not member or member.__code__ is not member_code:
                    replaced.append(f"{cls.__name__}.{attr}")
            if replaced:
                passed = False
                message = f"测试模块里的 {'、'.join(replaced)} 在评测中被换掉了，这个测试不算通过"
            test_output = sink.getvalue()
            audit(PROGRESS_EVENT, "outcome", file, name, passed, message, test_output)
            outcomes.append(Outcome(file, name, passed, message, hidden, test_output))

    audit(PROGRESS_EVENT, "done")
    status = "ok" if outcomes and all(o.passed for o in outcomes) else "fail"
    error = "" if outcomes else "没有找到任何测试"
    return Report(status=status, outcomes=outcomes, error=error, output=output)


def timeout_report(tests: list[SourceFile], seconds: float) -> Report:
    """外层判定超时时用：所有测试记为失败。"""
    message = (
        f"超时：评测超过 {seconds:g} 秒仍未结束（有死循环，或者算法太慢？），所有测试记为失败。"
    )
    return Report(status="timeout", outcomes=_all_failed(tests, "超时"), error=message)


def crash_report(tests: list[SourceFile], detail: str) -> Report:
    """外层发现评测进程异常退出（如读者调用了 os._exit）时用：所有测试记为失败。"""
    message = "评测进程异常退出，所有测试记为失败。\n" + _truncate(detail)
    return Report(status="crash", outcomes=_all_failed(tests, "评测进程异常退出"), error=message)


def invalid_report(tests: list[SourceFile], reason: str) -> Report:
    """外层发现评测结果不可信（通道上的数据对不上、评测器被改动、仓库文件被改）时用：所有测试记为失败。"""
    message = "评测结果无效，所有测试记为失败：\n" + _truncate(reason)
    return Report(status="invalid", outcomes=_all_failed(tests, "评测结果无效"), error=message)


# ---------------------------------------------------------------- 报告


# 控制字符（终端转义序列、回车、退格……）和改变文字方向的 Unicode 字符：打印前写成转义形式，
# 免得读者代码的输出改写终端里已经显示的结果。只保留换行和制表符。
_CONTROL_CHARS = [*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {
    c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
    for c in _CONTROL_CHARS
    if chr(c) not in "\n\t"
}


def printable(text: str) -> str:
    """把控制字符写成 ``\\x1b``、``\\u202e`` 这样的转义，换行和制表符不动。"""
    return text.translate(_ESCAPES)


def summary_line(report: Report) -> str:
    return f"{report.passed} passed, {report.failed} failed"


def _indent(text: str, prefix: str = "      ") -> list[str]:
    return [prefix + line if line else "" for line in text.splitlines()]


def format_report(report: Report, show_hidden_details: bool = False) -> str:
    """逐个测试列出 PASS/FAIL，最后一行是 ``N passed, M failed``。

    隐藏测试只显示名字和结果；可见测试失败时附上断言信息和它运行时的输出。
    """
    lines: list[str] = []
    if report.status == "load_error":
        lines.append("候选代码加载失败：")
        lines.extend(_indent(report.error, "    "))
        if report.output:
            lines.append("  加载时的输出：")
            lines.extend(_indent(report.output, "    "))
        lines.append("")
    elif report.error:
        lines.extend(report.error.splitlines())
        lines.append("")
    per_test_details = report.status in ("ok", "fail")
    for o in report.outcomes:
        mark = "PASS" if o.passed else "FAIL"
        tag = "（隐藏）" if o.hidden else ""
        lines.append(f"{mark}  {o.id}{tag}")
        if o.passed or not per_test_details:
            continue
        if o.hidden and not show_hidden_details:
            continue
        lines.extend(_indent(o.message))
        if o.output:
            lines.append("      输出：")
            lines.extend(_indent(o.output, "        "))
    lines.append("")
    lines.append(summary_line(report))
    return printable("\n".join(lines))


# ---------------------------------------------------------------- front matter


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """解析 ``---`` 包住的 ``key: value`` 头（不依赖 yaml）。

    返回 (字段, 正文)；没有头时字段为空。
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ValueError("front matter 缺少结尾的 ---")
    meta: dict[str, str] = {}
    for number, line in enumerate(lines[1:end], start=2):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"front matter 第 {number} 行不是 key: value 形式：{line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        meta[key.strip()] = value
    body = "\n".join(lines[end + 1 :]).strip("\n") + "\n"
    return meta, body


def check_meta(meta: dict[str, str]) -> list[str]:
    """检查题目 front matter 的字段，返回问题列表（空表示没问题）。"""
    problems = [f"缺少字段 {key}" for key in REQUIRED_META if not meta.get(key)]
    chapter = meta.get("chapter")
    if chapter and chapter != APPENDIX and not (chapter.isdigit() and int(chapter) >= 1):
        problems.append(f"chapter 应为正整数或 {APPENDIX}，得到 {chapter!r}")
    difficulty = meta.get("difficulty")
    if difficulty and difficulty not in DIFFICULTIES:
        problems.append(f"difficulty 应为 {'|'.join(DIFFICULTIES)} 之一，得到 {difficulty!r}")
    runtime = meta.get("runtime")
    if runtime and runtime not in RUNTIMES:
        problems.append(f"runtime 应为 {'|'.join(RUNTIMES)} 之一，得到 {runtime!r}")
    limit = meta.get("time_limit")
    if limit is not None:
        try:
            ok = 0 < float(limit) <= 600
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"time_limit 应为 (0, 600] 之间的秒数，得到 {limit!r}")
    return problems


# ---------------------------------------------------------------- 入口


def _tests_from_json(items: list[dict[str, Any]]) -> list[SourceFile]:
    return [SourceFile(t["name"], t["source"], bool(t.get("hidden", False))) for t in items]


def run_json(request_json: str) -> str:
    """浏览器 Worker 的入口。

    请求 ``{"code", "tests": [{"name", "source", "hidden"}]}``，返回报告的 JSON。

    默认抹掉隐藏测试的细节（``"redact_hidden": false`` 可保留）。
    """
    request = json.loads(request_json)
    report = grade(request["code"], _tests_from_json(request["tests"]))
    if request.get("redact_hidden", True):
        report = report.redacted()
    return json.dumps(report.to_dict(), ensure_ascii=False)
