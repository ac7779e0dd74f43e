"""按章切片工具：minisgl/ 是唯一一份引擎源码，每一章的代码都从它切出来。

一个文件的「归属章」是在 chapter.toml 的 new 里列出它的那一章；early 可以把后面章节的文件提前引入。
后面章节对已有文件的增删用整行注释标记（添加块可以嵌套，删除块里不能再有标记；
合法性由 ``parse_markers`` 检查）：

    # >> ch11                 从这里开始的行，从第 11 章起才出现
    ...
    # << ch11
    # ~~ ch08 < ch11          只在第 8～10 章出现的行，每行写成 '#~ <代码>'
    #~ self.run_normal()      （ruff format 会改写成 '# ~ <代码>'，也认；空行写成 '#~'）
    # ~~

一个文件可以在成为独立文件之前，先作为另一个文件的一部分出现（代码长大以后按职责拆出去）：

    # ++ server/frontend.py < ch16   第 16 章之前，这里是 server/frontend.py 在这一章的内容

被并入的文件（``server/frontend.py``）的归属章必须就是这里的 ch16；它的行从宿主文件出现的那一章起
就算数（它自己的 ``# >> chNN`` 标记照常起作用）。并入时去掉它开头的文档字符串、import、``__all__``
和 ``logger``（宿主文件各有一份），
把它的 import 合并进宿主文件开头的 import 块（同一章里一起并入的文件之间的 import 去掉），
然后交给 ruff 排好 import、格式化。

每一章的切片和最终的包一样要过 ruff（``check`` 会检查）。标记行在切片里消失，所以：
块外的空行每一章都有，块内的空行只在块出现的章节才有，两边加起来要符合 ruff format；
ruff format 会在紧跟 import 的注释前加一个空行，所以标记不能夹在同一个 import 块的两行之间——
给已有的 import 加名字时用括号把它写成多行，标记放在括号里；新模块的 import 放进块里、
写在模块的代码之后（这些文件在 pyproject.toml 里单独允许 E402）。

命令：list / stats N / tree N / build N --out DIR / diff N / check [N ...] / record N /
run N|latest。
其他工具（mkdocs 钩子、测试）直接 import 本模块使用其中的函数。
"""

from __future__ import annotations

import argparse
import ast
import datetime
import difflib
import functools
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "minisgl"
INF = 10**9  # 「永远存在」的章号上界

_OPEN_ADD = re.compile(r"^(\s*)# >> ch(\d+)\s*$")
_CLOSE_ADD = re.compile(r"^(\s*)# << ch(\d+)\s*$")
_OPEN_DEL = re.compile(r"^(\s*)# ~~ ch(\d+) < ch(\d+)\s*$")
_CLOSE_DEL = re.compile(r"^(\s*)# ~~\s*$")
_ANY_MARKER = re.compile(r"^\s*# ?(>>|<<|~~)")
# 删除块里的行写成 '#~ 代码'；ruff format 会把它改写成 '# ~ 代码'，两种写法都认
_DELETED_LINE = re.compile(r"^(\s*)# ?~(?: (.*))?$")
_STRAY_DELETED = re.compile(r"^\s*#~")
_INCLUDE = re.compile(r"^# \+\+ (\S+) < ch(\d+)\s*$")


class StepsError(Exception):
    """切片、清单或标记出错；消息里写明文件和行号。"""


@dataclass
class Chapter:
    number: int
    slug: str
    dir: Path
    title: str
    part: str
    new: list[str]
    early: list[str]
    main: Path
    tests: list[Path]
    volatile: list[str] = field(default_factory=list)
    model: str = ""
    demo: bool = False  # make run 运行的"完整服务演示"（最后一个 demo = true 的章节）

    @property
    def label(self) -> str:
        return f"{self.number:02d}-{self.slug}"


@dataclass
class Excerpt:
    path: str
    qualname: str
    start: int
    end: int
    code: str


@dataclass
class _Line:
    text: str  # 切片里的样子（已去掉 '#~ '）
    lo: int  # 从第 lo 章起出现
    hi: int  # 到第 hi 章（不含）为止
    source_line: int
    include: str = ""  # '# ++' 行：在这里并入的文件（相对 minisgl/）


# ---------------------------------------------------------------- 章节清单


def _chapters_dir() -> Path:
    return REPO / "chapters"


@functools.cache
def load_chapters() -> list[Chapter]:
    chapters: list[Chapter] = []
    for d in sorted(_chapters_dir().iterdir()):
        m = re.fullmatch(r"(\d\d)-([a-z0-9-]+)", d.name)
        if not d.is_dir() or not m:
            continue
        toml_path = d / "chapter.toml"
        if not toml_path.exists():
            raise StepsError(f"{d.relative_to(REPO)}: 缺少 chapter.toml")
        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise StepsError(f"{toml_path.relative_to(REPO)}: {e}") from None
        for key in ("title", "part", "new"):
            if key not in data:
                raise StepsError(f"{toml_path.relative_to(REPO)}: 缺少字段 {key!r}")
        main = d / data.get("main", "main.py")
        chapters.append(
            Chapter(
                number=int(m.group(1)),
                slug=m.group(2),
                dir=d,
                title=data["title"],
                part=data["part"],
                new=list(data["new"]),
                early=list(data.get("early", [])),
                main=main,
                tests=sorted(d.glob("test_*.py")),
                volatile=list(data.get("volatile", [])),
                model=data.get("model", ""),
                demo=bool(data.get("demo", False)),
            )
        )
    numbers = [c.number for c in chapters]
    if len(set(numbers)) != len(numbers):
        raise StepsError(f"章号重复：{numbers}")
    if not chapters:
        raise StepsError("chapters/ 下没有任何章节")
    return chapters


def reset_caches() -> None:
    """REPO 或文件内容变化后（测试里）清空缓存。"""
    for f in (load_chapters, _homes, _includes, _parsed, slice_text, status):
        f.cache_clear()


def get_chapter(n: int) -> Chapter:
    for c in load_chapters():
        if c.number == n:
            return c
    raise StepsError(f"没有第 {n} 章（已有：{[c.number for c in load_chapters()]}）")


def latest_chapter() -> int:
    return load_chapters()[-1].number


def demo_chapter() -> int:
    """make run 演示的章节：最后一个 ``demo = true`` 的章节，没有时就是最新的一章。

    最新的一章不一定适合当演示：第四阶段的章节讲 GPU 快路径和基准测试，而 make run 要给新读者看
    完整的服务（拉起服务、用 openai 客户端流式问答、打印用量）。"""
    demos = [c.number for c in load_chapters() if c.demo]
    return demos[-1] if demos else latest_chapter()


@functools.cache
def _homes() -> dict[str, tuple[int, int]]:
    """每个文件 → (首次出现的章, 归属章)。"""
    home: dict[str, int] = {}
    first: dict[str, int] = {}
    for c in load_chapters():
        for rel in c.new:
            if rel in home:
                raise StepsError(
                    f"chapters/{c.label}/chapter.toml: {rel} 已经是第 {home[rel]} 章的新文件"
                )
            home[rel] = c.number
        for rel in c.early:
            if rel in first:
                raise StepsError(f"chapters/{c.label}/chapter.toml: {rel} 被重复提前引入")
            first[rel] = c.number
    for rel, ch in first.items():
        if rel not in home:
            raise StepsError(f"{rel} 被第 {ch} 章提前引入，但没有任何一章把它列为 new")
        if ch >= home[rel]:
            raise StepsError(f"{rel} 在第 {ch} 章「提前」引入，但它的归属章是第 {home[rel]} 章")
    for rel in home:
        if not (REPO / PACKAGE / rel).is_file():
            raise StepsError(f"清单里的 {PACKAGE}/{rel} 不存在（第 {home[rel]} 章）")
    on_disk = {
        p.relative_to(REPO / PACKAGE).as_posix()
        for p in (REPO / PACKAGE).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    orphans = sorted(on_disk - set(home))
    if orphans:
        raise StepsError(f"这些文件没有归属章（在某章 chapter.toml 的 new 里列出它们）：{orphans}")
    return {rel: (min(h, first.get(rel, h)), h) for rel, h in home.items()}


# ---------------------------------------------------------------- 标记解析与切片


def parse_markers(text: str, path: str, first: int, known: set[int]) -> list[_Line]:
    """把带标记的源文件解析成「行 + 出现区间」；标记不合法时抛出 StepsError。"""
    out: list[_Line] = []
    # 栈里每项：(种类, lo, hi, 开始行号, 开始章)
    stack: list[tuple[str, int, int, int, int]] = []

    def err(lineno: int, msg: str) -> StepsError:
        return StepsError(f"{path}:{lineno}: {msg}")

    def chapter(lineno: int, n: int) -> int:
        if n not in known:
            raise err(lineno, f"未知的章 ch{n:02d}（已有：{sorted(known)}）")
        return n

    for lineno, line in enumerate(text.splitlines(), 1):
        lo = max([first] + [s[1] for s in stack])
        hi = min([INF] + [s[2] for s in stack])
        in_deleted = bool(stack) and stack[-1][0] == "del"
        if m := _OPEN_ADD.match(line):
            n = chapter(lineno, int(m.group(2)))
            if in_deleted:
                raise err(lineno, "删除块（# ~~）里不能再嵌套标记")
            if n <= lo:
                where = "所在文件的起始章" if not stack else "外层标记"
                raise err(lineno, f"'# >> ch{n:02d}' 不晚于{where}（第 {lo} 章），这个标记没有意义")
            stack.append(("add", n, hi, lineno, n))
        elif m := _CLOSE_ADD.match(line):
            n = int(m.group(2))
            if not stack or stack[-1][0] != "add":
                raise err(lineno, f"'# << ch{n:02d}' 没有对应的 '# >> ch{n:02d}'")
            if stack[-1][4] != n:
                raise err(
                    lineno,
                    f"'# << ch{n:02d}' 与第 {stack[-1][3]} 行的 '# >> ch{stack[-1][4]:02d}' 不匹配",
                )
            stack.pop()
        elif m := _OPEN_DEL.match(line):
            a, b = chapter(lineno, int(m.group(2))), chapter(lineno, int(m.group(3)))
            if in_deleted:
                raise err(lineno, "删除块（# ~~）里不能再嵌套标记")
            if b <= a:
                raise err(lineno, f"'# ~~ ch{a:02d} < ch{b:02d}'：结束章必须晚于开始章")
            if a < lo:
                raise err(lineno, f"'# ~~ ch{a:02d} < …' 早于这段代码出现的第 {lo} 章")
            if b > hi:
                raise err(lineno, f"'# ~~ … < ch{b:02d}' 晚于外层标记的结束章 {hi}")
            stack.append(("del", a, b, lineno, a))
        elif _CLOSE_DEL.match(line):
            if not in_deleted:
                raise err(lineno, "'# ~~' 没有对应的 '# ~~ chA < chB'")
            stack.pop()
        elif m := _INCLUDE.match(line):
            upto = chapter(lineno, int(m.group(2)))
            if stack:
                raise err(lineno, "'# ++' 不能写在其他标记块里")
            if upto <= lo:
                raise err(lineno, f"'# ++ … < ch{upto:02d}' 不晚于所在文件的起始章（第 {lo} 章）")
            out.append(_Line("", lo, upto, lineno, include=m.group(1)))
        elif _ANY_MARKER.match(line) or line.startswith("# ++"):
            raise err(lineno, f"无法识别的标记：{line.strip()!r}")
        elif in_deleted:
            m = _DELETED_LINE.match(line)
            if m is None:
                if line.strip():
                    raise err(lineno, "删除块里的每一行都要写成 '#~ <代码>'")
                out.append(_Line("", lo, hi, lineno))
            else:  # 只有 '#~' 的行是空行：不留缩进，切片里不会出现只有空白的行
                code = m.group(2)
                out.append(_Line(m.group(1) + code if code else "", lo, hi, lineno))
        else:
            if _STRAY_DELETED.match(line):
                raise err(lineno, "'#~' 行只能出现在删除块（# ~~ chA < chB … # ~~）里")
            out.append(_Line(line, lo, hi, lineno))
    if stack:
        kind, _, _, lineno, n = stack[-1]
        opener = f"# >> ch{n:02d}" if kind == "add" else "# ~~"
        raise err(lineno, f"'{opener}' 直到文件末尾都没有闭合")
    return out


def _read(rel: str) -> str:
    return (REPO / PACKAGE / rel).read_text(encoding="utf-8")


@functools.cache
def _includes() -> dict[str, tuple[str, int]]:
    """被并入的文件 → (宿主文件, 到第几章为止并入)。"""
    homes = _homes()
    found: dict[str, tuple[str, int]] = {}
    for rel in homes:
        if not rel.endswith(".py"):
            continue
        for lineno, line in enumerate(_read(rel).splitlines(), 1):
            if not (m := _INCLUDE.match(line)):
                continue  # 写错的 '# ++' 行由 parse_markers 报告
            where = f"{PACKAGE}/{rel}:{lineno}"
            target, upto = m.group(1), int(m.group(2))
            if target not in homes:
                raise StepsError(f"{where}: 并入的 {PACKAGE}/{target} 不在任何一章的清单里")
            if target in found:
                raise StepsError(f"{where}: {PACKAGE}/{target} 已经并入了 {found[target][0]}")
            if homes[target][0] != upto:
                raise StepsError(
                    f"{where}: {PACKAGE}/{target} 从第 {homes[target][0]} 章起才是独立的文件，"
                    f"'# ++' 要写成 '< ch{homes[target][0]:02d}'"
                )
            found[target] = (rel, upto)
    return found


@functools.cache
def _parsed(rel: str) -> tuple[_Line, ...]:
    first, _ = _homes()[rel]
    if rel in _includes():  # 并入别的文件的那几章也算：它的行从宿主文件出现时算起
        first = _homes()[_includes()[rel][0]][0]
    known = {c.number for c in load_chapters()}
    return tuple(parse_markers(_read(rel), f"{PACKAGE}/{rel}", first, known))


def _lines_at(rel: str, n: int) -> list[_Line]:
    lines: list[_Line] = []
    for ln in _parsed(rel):
        if not ln.lo <= n < ln.hi:
            continue
        if ln.include:
            lines.extend(_inlined_body(ln.include, n))
        else:
            lines.append(ln)
    # 文件末尾的标记块被切掉后，前面为它留的空行会悬在末尾：去掉
    while lines and not lines[-1].text.strip():
        lines.pop()
    return lines


# 文件开头、并入时和 import 一起去掉的赋值：宿主文件自己有一份
_HEADER_NAMES = {"__all__", "logger"}


def _assigns(stmt: ast.Assign | ast.AugAssign) -> str:
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
    return target.id if isinstance(target, ast.Name) else ""


def _header_end(text: str) -> tuple[int, list[ast.stmt]]:
    """文件开头的文档字符串、import、``__all__`` 和 ``logger`` 到第几行为止；以及其中的 import。"""
    end, imports = 0, []
    for stmt in ast.parse(text).body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports.append(stmt)
        elif not (
            (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
            or (isinstance(stmt, (ast.Assign, ast.AugAssign)) and _assigns(stmt) in _HEADER_NAMES)
        ):
            break
        end = stmt.end_lineno or stmt.lineno
    return end, imports


def _inlined_body(rel: str, n: int) -> list[_Line]:
    """并入宿主文件的部分：去掉开头（``_header_end``）和随后的空行，
    前后各留两个空行（顶层定义之间的空行）。"""
    lines = _lines_at(rel, n)
    end, _ = _header_end("".join(ln.text + "\n" for ln in lines))
    body = lines[end:]
    while body and not body[0].text.strip():
        body.pop(0)
    blank = [_Line("", n, n + 1, 0)] * 2
    return blank + body + blank


def _first_import_block_end(text: str) -> int:
    """文件开头（文档字符串之后）那一块 import 的最后一行。"""
    end = 0
    for stmt in ast.parse(text).body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            end = stmt.end_lineno or stmt.lineno
        elif end or not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            break
    return end


def _module_of(rel: str) -> str:
    return f"{PACKAGE}." + rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _merge_imports(rel: str, n: int, text: str) -> str:
    """把第 n 章并入 ``rel`` 的文件的 import 合并进 ``rel`` 开头的 import 块，交给 ruff 排序、
    合并重复，再格式化整个文件。"""
    inlined = {t for t, (host, upto) in _includes().items() if host == rel and n < upto}
    if not inlined:
        return text
    local = {_module_of(t) for t in inlined} | {_module_of(rel)}
    package = _module_of(rel).rsplit(".", 1)[0]
    extra: list[str] = []
    for target in sorted(inlined):
        _, imports = _header_end("".join(ln.text + "\n" for ln in _lines_at(target, n)))
        for stmt in imports:
            if isinstance(stmt, ast.ImportFrom):
                if stmt.module == "__future__":
                    continue
                base = package if stmt.level == 1 else ""
                module = f"{base}.{stmt.module}" if stmt.level else stmt.module
                if stmt.level > 1:
                    raise StepsError(f"{PACKAGE}/{target}: 并入的文件只能用同一个包里的相对 import")
                if module in local:
                    continue
            extra.append(ast.unparse(stmt))
    end = _first_import_block_end(text)
    lines = text.splitlines()
    merged = "\n".join(lines[:end] + extra + lines[end:]) + "\n"
    config = ["--config", str(REPO / "pyproject.toml"), "--stdin-filename", f"{PACKAGE}/{rel}"]
    for args in (["check", "--select", "I", "--fix", "--quiet"], ["format"]):
        r = subprocess.run(
            [sys.executable, "-m", "ruff", *args, *config, "-"],
            input=merged,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise StepsError(f"{PACKAGE}/{rel}: 第 {n} 章合并 import 失败：{r.stderr.strip()}")
        merged = r.stdout
    return merged


def _slice_lines(rel: str, n: int) -> list[_Line] | None:
    first, _ = _homes()[rel]
    if n < first:
        return None
    return _lines_at(rel, n)


@functools.cache
def slice_text(rel: str, n: int) -> str | None:
    """文件在第 n 章时的样子（标记已去掉）；这一章还没有这个文件时返回 None。"""
    if rel not in _homes():
        raise StepsError(f"{PACKAGE}/{rel} 不在任何一章的清单里")
    lines = _slice_lines(rel, n)
    if lines is None:
        return None
    return _merge_imports(rel, n, "".join(ln.text + "\n" for ln in lines))


def files_at(n: int) -> list[str]:
    return sorted(rel for rel, (first, _) in _homes().items() if first <= n)


@dataclass
class Status:
    total: list[str]
    new: list[str]
    modified: list[str]
    early: list[str]


@functools.cache  # 统计行、文件清单行和文件树各要一次；切片比较只做一遍
def status(n: int) -> Status:
    c = get_chapter(n)
    before = set(files_at(n - 1)) if n > 1 else set()
    modified = [
        rel for rel in files_at(n) if rel in before and slice_text(rel, n) != slice_text(rel, n - 1)
    ]
    return Status(total=files_at(n), new=list(c.new), modified=modified, early=list(c.early))


def stats_line(n: int) -> str:
    s = status(n)
    return (
        f"到这一章为止的文件：{len(s.total)} 个"
        f"（新建 {len(s.new)}，修改 {len(s.modified)}，提前引入 {len(s.early)}）"
    )


def new_files_line(n: int) -> str:
    s = status(n)
    parts = [f"本章要写的文件：{'、'.join(s.new)}。" if s.new else "本章没有新文件。"]
    if s.modified:
        parts.append(f"要修改的文件：{'、'.join(s.modified)}。")
    if s.early:
        parts.append(f"提前引入：{'、'.join(s.early)}。")
    return "".join(parts)


def tree_text(n: int) -> str:
    """像种子章节那样的文件树：有变化的目录展开并标出新建/修改，其余目录折叠成一行。"""
    s = status(n)
    marks = {rel: "  ← 本章新建" for rel in s.new}
    marks.update({rel: "  ← 本章修改" for rel in s.modified})
    marks.update({rel: "  ← 提前引入" for rel in s.early})
    order = {rel: i for i, rel in enumerate(s.new + s.early)}
    lines = [f"{PACKAGE}/"]

    def walk(prefix: str, files: list[str], indent: str) -> None:
        here = [f for f in files if "/" not in f[len(prefix) :]]
        subdirs = sorted({f[len(prefix) :].split("/")[0] for f in files if f not in here})

        def key(f: str) -> tuple[int, int, str]:
            name = f[len(prefix) :]
            if name == "__init__.py":
                return (0, 0, name)
            if f in order and f not in s.modified:
                return (2, order[f], name)  # 本章新出现的文件排在后面，按清单顺序
            return (1, 0, name)

        for f in sorted(here, key=key):
            lines.append(f"{indent}├── {f[len(prefix) :]}{marks.get(f, '')}")
        for d in subdirs:
            inside = [f for f in files if f.startswith(f"{prefix}{d}/")]
            if any(f in marks for f in inside):
                lines.append(f"{indent}├── {d}/")
                walk(f"{prefix}{d}/", inside, indent + "│   ")
            else:
                lines.append(f"{indent}├── {d}/  （{len(inside)} 个文件，不变）")

    walk("", s.total, "")
    return "\n".join(lines)


# ---------------------------------------------------------------- 摘录


def excerpt_text(text: str, qualname: str, label: str) -> Excerpt:
    """按限定名（如 "Registry.register"）从源码里取出一段；qualname 为空时取整个文件。"""
    lines = text.splitlines()
    if not qualname:
        return Excerpt(label, "", 1, len(lines), text.rstrip("\n") + "\n")
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise StepsError(f"{label}:{e.lineno}: 无法解析：{e.msg}") from None
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in qualname.split("."):
        node = None
        for stmt in body:
            if _defines(stmt, part):
                node = stmt
        if node is None:
            raise StepsError(f"{label}: 找不到 {qualname!r}（缺少 {part!r}）")
        body = getattr(node, "body", [])
    assert node is not None
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    end = node.end_lineno or node.lineno
    code = textwrap.dedent("\n".join(lines[start - 1 : end])) + "\n"
    return Excerpt(label, qualname, start, end, code)


def _defines(stmt: ast.stmt, name: str) -> bool:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name == name
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name
    return False


def excerpt(n: int, rel: str, qualname: str) -> Excerpt:
    text = slice_text(rel, n)
    if text is None:
        raise StepsError(f"第 {n} 章还没有 {PACKAGE}/{rel}")
    return excerpt_text(text, qualname, f"{PACKAGE}/{rel}")


# ---------------------------------------------------------------- 限时运行子进程

# 限时运行一条命令，连同它起的全部进程一起收拾：测试脚本用它，卡住的一步不会拖住整轮测试。
#
# ``subprocess.run(..., timeout=...)`` 管不住两种情况：
#
# - 超时只杀直接的子进程。它起的进程（tokenizer、调度器、服务器……）还活着，又握着输出管道的
#   写端，读输出的一方就永远等不到结尾；
# - 子进程自己退出了，它起的进程却留了下来：同样握着管道，或者在后台一直占着 CPU 和端口。
#
# 所以每条命令在环境变量 ``MINISGL_RUN_TAG`` 里带一个只属于它的标记：子进程、孙进程……无论换了
# 进程组、会话，还是父进程已经退出，环境变量都跟着它们。按这个标记找出全部后代：
#
# - 超时：先让它们各自打印所有线程的 Python 栈（``PYTHONFAULTHANDLER``，收到 SIGABRT 时打印），
#   看得出卡在哪里，再全部杀掉；
# - 主进程退出后过了 ``grace`` 秒还活着的后代：同样打印栈、杀掉，并记为"留下了进程"。

RUN_TAG = "MINISGL_RUN_TAG"


@dataclass
class Finished:
    """一条命令的结果。``returncode`` 为 None：超时，被杀掉了。"""

    returncode: int | None
    output: str
    seconds: float
    timeout: float
    leftovers: list[str] = field(default_factory=list)  # 主进程退出后还活着、被杀掉的进程

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.leftovers

    def problem(self) -> str:
        """超时、留下了进程时的一段说明（放在输出后面）；都没有时是空串。"""
        lines = []
        if self.returncode is None:
            lines.append(f"超时：{self.timeout:.0f} 秒还没有结束，连同它起的进程一起杀掉了")
        if self.leftovers:
            lines.append(f"主进程退出后留下了 {len(self.leftovers)} 个进程（已杀掉）：")
            lines += [f"  {cmd}" for cmd in self.leftovers]
        return "\n".join(lines)

    def report(self) -> str:
        """给读者看的：命令的输出，超时或留下了进程时后面再加上 ``problem()`` 的说明。"""
        return f"{self.output.rstrip()}\n{self.problem()}".strip()


def tagged_processes(tag: str) -> list[psutil.Process]:
    """环境变量里带着这个标记的进程：一条命令起的全部进程。"""
    found = []
    for proc in psutil.process_iter():
        try:
            if tag in proc.environ().get(RUN_TAG, "").split():
                found.append(proc)
        except (psutil.Error, OSError):  # 刚刚退出，或者属于别的用户
            pass
    return found


def _describe(proc: psutil.Process) -> str:
    try:
        return f"{proc.pid} {' '.join(proc.cmdline())[:200]}"
    except psutil.Error:
        return str(proc.pid)


def _dump_and_kill(procs: list[psutil.Process]) -> None:
    """逐个 SIGABRT（Python 进程打印各线程的栈后退出），最后还在的 SIGKILL。

    一个一个来：几个进程同时往同一个管道里写栈，行会交错在一起，谁也读不懂。
    """
    alive: list[psutil.Process] = []
    for proc in procs:
        try:
            proc.send_signal(signal.SIGABRT)
        except psutil.Error:
            continue
        _, still = psutil.wait_procs([proc], timeout=3)
        alive += still
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)


def run_bounded(
    cmd: list[str],
    *,
    cwd: str | os.PathLike[str],
    env: dict[str, str],
    timeout: float,
    echo: Callable[[str], None] | None = None,
    grace: float = 10.0,
) -> Finished:
    """运行 ``cmd``，标准输出和标准错误合在一起收下（``echo`` 给了时每一行也交给它）。

    输出按 UTF-8 解码，坏字节换成替换字符。SIGABRT 打印栈之后本该生成 core 文件：这里把
    core 文件的上限设成 0（子进程继承），不在仓库或临时目录里留下几百 MB 的文件。
    """
    tag = uuid.uuid4().hex
    # 套着运行时（run_tests.py → steps.py check → 每一章）标记一层层往后加：外层超时时，
    # 里层起的进程也带着外层的标记，一起被找到
    outer = env.get(RUN_TAG, "")
    env = {**env, RUN_TAG: f"{outer} {tag}".strip(), "PYTHONFAULTHANDLER": "1"}
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    start = time.monotonic()
    lines: list[str] = []
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        encoding="utf-8",
        errors="replace",
    )
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        for line in stdout:
            lines.append(line)
            if echo is not None:
                echo(line)

    # 读输出放在另一个线程：管道被留下来的进程握着时，读的一方等不到结尾，但主线程照样能收拾
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    leftovers: list[str] = []
    try:
        returncode: int | None = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        returncode = None
        _dump_and_kill(tagged_processes(tag))  # 主进程自己也带着标记
        proc.kill()  # 万一没找到它（读不了它的环境变量）；已经退出时什么也不做
        proc.wait()
    else:
        deadline = time.monotonic() + grace
        while (rest := tagged_processes(tag)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if rest:
            leftovers = [_describe(p) for p in rest]
            _dump_and_kill(rest)
    reader.join(timeout=10)  # 留下的进程都杀掉了，管道应当已经到了结尾
    return Finished(returncode, "".join(lines), time.monotonic() - start, timeout, leftovers)


# ---------------------------------------------------------------- 构建切片


def build(n: int, out: Path) -> Path:
    """把第 n 章的切片、这一章的 main 和测试写到 out 下；返回 out。"""
    c = get_chapter(n)
    if out.exists():
        shutil.rmtree(out)
    for rel in files_at(n):
        text = slice_text(rel, n)
        assert text is not None
        dst = out / PACKAGE / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text, encoding="utf-8")
    chapter_out = out / "chapters" / c.dir.name
    chapter_out.mkdir(parents=True)
    for p in [c.main, *c.tests, c.dir / "chapter.toml"]:
        shutil.copy2(p, chapter_out / p.name)
    shutil.copy2(_chapters_dir() / "conftest.py", out / "chapters" / "conftest.py")
    shutil.copy2(REPO / "pyproject.toml", out / "pyproject.toml")  # pytest 配置
    (out / "models").symlink_to(REPO / "models", target_is_directory=True)
    return out


def compile_slice(n: int) -> None:
    """切片里的每个 .py 文件都必须能 compile()；出错时同时给出切片行号和源文件行号。"""
    for rel in files_at(n):
        if not rel.endswith(".py"):
            continue
        lines = _slice_lines(rel, n)
        assert lines is not None
        text = "".join(ln.text + "\n" for ln in lines)
        try:
            compile(text, f"{PACKAGE}/{rel}", "exec")
        except SyntaxError as e:
            src = lines[e.lineno - 1].source_line if e.lineno and e.lineno <= len(lines) else "?"
            raise StepsError(
                f"{PACKAGE}/{rel}:{src}: 第 {n} 章的切片无法编译（切片第 {e.lineno} 行）：{e.msg}"
            ) from None


def lint_slice(root: Path) -> str:
    """用仓库的 ruff 配置（``build`` 复制进切片的 pyproject.toml）检查切片里的包：
    ``ruff check`` 和 ``ruff format --check``。干净时返回空字符串，否则返回 ruff 的输出
    （格式问题带 diff：切片里的行号和源文件不同，看上下文找到源文件里的那几行）。"""
    config = root / "pyproject.toml"
    out = []
    for args in (["check"], ["format", "--check", "--diff"]):
        r = subprocess.run(
            [sys.executable, "-m", "ruff", *args, "--no-cache", "--config", str(config), PACKAGE],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            out.append(f"$ ruff {' '.join(args)} {PACKAGE}\n{r.stdout}{r.stderr}")
    return "\n".join(out)


def validate() -> None:
    """检查所有清单和所有文件的标记（不编译）。"""
    _includes()
    for rel in _homes():
        _parsed(rel)


def _slice_env(
    root: Path, n: int, device: str | None = None, model: str | None = None, tp: int = 0
) -> dict[str, str]:
    env = dict(os.environ)
    # 切片排在最前面（minisgl 只能来自切片）；原有的 PYTHONPATH 留在后面，装在别处的依赖仍然找得到
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    env["MINISGL_STEP"] = str(n)
    env["MINISGL_SLICE_ROOT"] = str(root)
    env["PYTHONUNBUFFERED"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if device:
        env["MINISGL_DEVICE"] = device
    if model:  # main 里 MODEL = os.environ.get("MINISGL_MODEL", 默认的内嵌模型)
        env["MINISGL_MODEL"] = model
    if tp:  # 多 rank 的章节（6、14、15）里 TP = int(os.environ.get("MINISGL_TP", 默认值))
        env["MINISGL_TP"] = str(tp)
    return env


# 先确认 minisgl 来自切片，再以 __main__ 身份运行 main
_RUN_MAIN = (
    "import os, runpy, sys; root = os.environ['MINISGL_SLICE_ROOT']; sys.path.insert(0, root); "
    "import minisgl; f = os.path.realpath(minisgl.__file__); "
    "assert f.startswith(os.path.realpath(root) + os.sep), f'minisgl 不是来自切片：{f}'; "
    "sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__')"
)

# 检查一章时每一步的时限（秒）。正常时远远用不完（2 核的机器上：导入几秒，main 最多一分钟，
# 最慢的一章测试约 3 分钟）；只为卡住时按时失败、说出卡在哪里，而不是让整轮测试一直等下去
IMPORT_TIMEOUT = 300
MAIN_TIMEOUT = 600
TESTS_TIMEOUT = 1500

# 在只有切片的解释器里导入切片中的每一个模块
_IMPORT_ALL = (
    "import importlib, os, sys; root = os.path.realpath(os.environ['MINISGL_SLICE_ROOT']); "
    "mods = sys.argv[1:]; "
    "[importlib.import_module(m) for m in mods]; "
    "src = lambda m: os.path.realpath(sys.modules[m].__file__); "
    "bad = [m for m in mods if not src(m).startswith(root + os.sep)]; "
    "assert not bad, f'这些模块不是来自切片：{bad}'; print(f'导入 {len(mods)} 个模块')"
)


def _module_names(n: int) -> list[str]:
    mods = []
    for rel in files_at(n):
        if rel.endswith(".py"):
            parts = rel[:-3].split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods.append(".".join([PACKAGE, *parts]))
    return mods


def run_main(
    n: int,
    root: Path,
    device: str | None,
    model: str | None = None,
    tp: int = 0,
) -> Finished:
    c = get_chapter(n)
    main = root / "chapters" / c.dir.name / c.main.name
    return run_bounded(
        [sys.executable, "-c", _RUN_MAIN, str(main.relative_to(root))],
        cwd=root,
        env=_slice_env(root, n, device, model, tp),
        timeout=MAIN_TIMEOUT,
    )


def _ensure_models() -> None:
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "make_tiny_model.py"), "--ensure", "--quiet"],
        check=True,
    )


def check(numbers: list[int], keep: bool = False, jobs: int = 1) -> bool:
    """逐章检查：标记、编译、ruff、只用切片的导入、main、测试、CPU 录制是否最新。

    ``jobs > 1`` 时几章同时检查（每章都在自己的临时目录里、自己的子进程中，互不相干）；
    每章的结果在这一章检查完后整段打印，顺序和章号一致。有章节没通过时，最后一行再点一次名：
    日志只留末尾几行时（CI 常常这样），也看得出是哪一章的哪一步。
    """
    validate()
    _ensure_models()
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(_check_one, n, keep) for n in numbers]
        failures = []
        for n, future in zip(numbers, futures):  # 按章号顺序打印：前一章没检查完时，后一章先等着
            failed, log = future.result()
            print(log, end="", flush=True)
            if failed:
                failures.append(f"第 {n} 章（{failed}）")
    if failures:
        print(f"\n没有通过：{'；'.join(failures)}", flush=True)
    return not failures


def _check_one(n: int, keep: bool) -> tuple[str | None, str]:
    """检查一章，返回（没通过的那一步，通过时是 None；要打印的全部文字）。"""
    c = get_chapter(n)
    log: list[str] = []
    start = time.monotonic()

    def step(what: str, passed: bool, detail: str) -> None:
        if passed:
            log.append(f"   ✓ {what}\n")
            return
        log.append(textwrap.indent(detail.rstrip()[-6000:], "     | ") + "\n")
        raise _StepFailed(what)

    failed = None
    root = Path(tempfile.mkdtemp(prefix=f"minisgl-ch{n:02d}-"))
    try:
        compile_slice(n)
        build(n, root)
        problems = lint_slice(root)
        step("ruff check、ruff format --check", not problems, problems)
        env = _slice_env(root, n, "cpu")
        mods = _module_names(n)
        r = run_bounded(
            [sys.executable, "-c", _IMPORT_ALL, *mods], cwd=root, env=env, timeout=IMPORT_TIMEOUT
        )
        step(f"切片导入（{len(mods)} 个模块）", r.ok, r.report())
        r = run_main(n, root, "cpu")
        step("main（cpu）", r.ok, r.report())
        rec = c.dir / "output.cpu.txt"
        if rec.exists():
            problems = _compare_recording(c, r.output)
            step("CPU 录制与本次输出一致", not problems, problems)
        else:
            step("CPU 录制存在", False, f"缺少 {rec.relative_to(REPO)}：运行 steps.py record {n}")
        r = run_bounded(
            [sys.executable, "-m", "pytest", "-q", f"chapters/{c.dir.name}"],
            cwd=root,
            env=env,
            timeout=TESTS_TIMEOUT,
        )
        tail = "\n".join(r.output.strip().splitlines()[-1:])
        step(f"测试（{tail}）", r.ok, r.report())
    except (StepsError, _StepFailed) as e:
        log.append(f"   ✗ {e}\n")
        failed = str(e).splitlines()[0]
    finally:
        if keep:
            log.append(f"   切片保留在 {root}\n")
        else:
            shutil.rmtree(root, ignore_errors=True)
    head = f"== 第 {n} 章 {c.title}（{time.monotonic() - start:.0f}s）\n"
    return failed, head + "".join(log)


class _StepFailed(Exception):
    pass


# ---------------------------------------------------------------- 录制运行结果

_HEADER_KEYS = ["命令", "设备", "模型", "torch", "Python", "日期"]
_HEADER_END = "# ---"
# 计时类数字随机器和负载变化，比较录制时统一替换
_TIMINGS = re.compile(r"\d+(?:\.\d+)?\s*(?:ms|µs|us|s|秒|毫秒|微秒)(?![A-Za-z])")


def normalize(text: str, volatile: list[str]) -> str:
    for pattern in volatile:
        text = re.sub(pattern, "<…>", text)
    text = _TIMINGS.sub("<t>", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _compare_recording(c: Chapter, output: str) -> str:
    _, body = read_recording(c.number, "cpu")
    want, got = normalize(body, c.volatile), normalize(output, c.volatile)
    if want == got:
        return ""
    diff = difflib.unified_diff(
        want.splitlines(), got.splitlines(), "录制（output.cpu.txt）", "本次运行", lineterm=""
    )
    body = "\n".join(diff)
    return f"CPU 录制已过时（运行 steps.py record {c.number} 重新录制）：\n{body}"


_PROBE = (
    "import platform, torch; from minisgl.utils.device import pick_device, device_summary; "
    "d = pick_device(); n = torch.cuda.device_count() if d.type == 'cuda' else 1; "
    "print(n); print(device_summary(d)); print(torch.__version__); "
    "print(platform.python_version())"
)


def recording_path(c: Chapter, kind: str, model: str | None = None) -> Path:
    """``output.cpu.txt``、``output.cuda.txt``；换了模型时 ``output.cuda.qwen3-0.6b-shape.txt``；
    两块 GPU 上 tp=2 的录制 ``kind`` 是 ``cuda.tp2``，文件是 ``output.cuda.tp2.txt``。"""
    suffix = f".{Path(model).name}" if model else ""
    return c.dir / f"output.{kind}{suffix}.txt"


def record(n: int, device: str, model: str | None = None, tp: int = 0) -> Path:
    """录制第 n 章的 main。``model``：换一个模型（``MINISGL_MODEL``），另存一份录制；
    ``tp``：多 rank 章节的 rank 数（``MINISGL_TP``），要求有这么多块 GPU，另存一份录制。"""
    if tp and not device.startswith("cuda"):
        raise StepsError("--tp 只用于 GPU 上的录制（CPU 上的多 rank 已经在默认的录制里）")
    c = get_chapter(n)
    if c.model:  # 不加载模型的章节不需要生成模型（GPU 机器上也许没有生成所需的包）
        _ensure_models()
    root = Path(tempfile.mkdtemp(prefix=f"minisgl-rec{n:02d}-"))
    try:
        build(n, root)
        probe = subprocess.run(
            [sys.executable, "-c", _PROBE],
            cwd=root,
            env=_slice_env(root, n, device),
            capture_output=True,
            text=True,
        )
        if probe.returncode != 0:
            raise StepsError(f"无法探测设备 {device}：\n{probe.stderr}")
        gpus, dev, torch_version, py_version = probe.stdout.strip().splitlines()[-4:]
        if tp and int(gpus) < tp:
            raise StepsError(f"tp={tp} 的录制要 {tp} 块 GPU，这里只有 {gpus} 块")
        if tp:
            dev = f"{tp} × {dev}"
        r = run_main(n, root, device, model=model, tp=tp)
        if not r.ok:
            raise StepsError(f"第 {n} 章的 main 在 {device} 上失败：\n{r.report()[-4000:]}")
        output = r.output
    finally:
        shutil.rmtree(root, ignore_errors=True)
    header = {
        "命令": f"{f'MINISGL_TP={tp} ' if tp else ''}python chapters/{c.dir.name}/{c.main.name}",
        "设备": dev,
        "模型": model or c.model or "（本章不加载模型）",
        "torch": torch_version,
        "Python": py_version,
        "日期": datetime.date.today().isoformat(),
    }
    kind = "cpu" if device == "cpu" else "cuda" if device.startswith("cuda") else device
    kind += f".tp{tp}" if tp else ""
    path = recording_path(c, kind, model)
    head = "".join(f"# {k}：{header[k]}\n" for k in _HEADER_KEYS)
    path.write_text(f"{head}{_HEADER_END}\n{output.rstrip()}\n", encoding="utf-8")
    return path


def read_recording(
    n: int, kind: str = "cpu", model: str | None = None
) -> tuple[dict[str, str], str]:
    c = get_chapter(n)
    path = recording_path(c, kind, model)
    if not path.exists():
        raise StepsError(f"缺少录制 {path.relative_to(REPO)}（运行 steps.py record {n}）")
    text = path.read_text(encoding="utf-8")
    head, sep, body = text.partition(_HEADER_END + "\n")
    if not sep:
        raise StepsError(f"{path.relative_to(REPO)}: 没有 '{_HEADER_END}' 分隔的头部")
    header: dict[str, str] = {}
    for line in head.splitlines():
        key, _, value = line.removeprefix("# ").partition("：")
        header[key] = value
    missing = [k for k in _HEADER_KEYS if k not in header]
    if missing:
        raise StepsError(f"{path.relative_to(REPO)}: 头部缺少 {missing}")
    return header, body


# ---------------------------------------------------------------- diff / 命令行


def diff(n: int) -> str:
    out: list[str] = []
    s = status(n)
    for rel in s.new + s.early:
        text = slice_text(rel, n) or ""
        out.append(f"新建 {PACKAGE}/{rel}（{len(text.splitlines())} 行）")
    for rel in s.modified:
        old = (slice_text(rel, n - 1) or "").splitlines()
        new = (slice_text(rel, n) or "").splitlines()
        name = f"{PACKAGE}/{rel}"
        out.extend(
            difflib.unified_diff(
                old, new, f"{name}（第 {n - 1} 章）", f"{name}（第 {n} 章）", lineterm=""
            )
        )
    return "\n".join(out)


def _parse_chapter(s: str) -> int:
    if s == "demo":
        return demo_chapter()
    return latest_chapter() if s == "latest" else int(s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="steps.py", description="按章切片、检查与录制")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="列出所有章节")
    for name in ("stats", "tree", "diff"):
        sub.add_parser(name).add_argument("n", type=_parse_chapter)
    b = sub.add_parser("build", help="写出第 N 章的切片")
    b.add_argument("n", type=_parse_chapter)
    b.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("check", help="逐章检查（默认全部）")
    c.add_argument("n", nargs="*", type=_parse_chapter)
    c.add_argument("--keep", action="store_true", help="保留临时切片目录")
    c.add_argument("--jobs", "-j", type=int, default=1, help="同时检查几章（默认 1）")
    r = sub.add_parser("record", help="重新运行 main 并录制输出")
    r.add_argument("n", type=_parse_chapter)
    r.add_argument("--device", default="cpu")
    r.add_argument("--model", help="换一个模型录制（另存为 output.<设备>.<模型名>.txt）")
    r.add_argument("--tp", type=int, default=0, help="多 rank 章节用几块 GPU（另存为 .tp<N>）")
    r.add_argument("--verify", action="store_true", help="只比较 CPU 录制是否最新")
    sub.add_parser("run", help="用完整的包运行某章的 main").add_argument("n", type=_parse_chapter)
    args = p.parse_args(argv)
    try:
        if args.cmd == "list":
            part = None
            for ch in load_chapters():
                if ch.part != part:
                    print(ch.part)
                    part = ch.part
                print(f"  {ch.number:02d} {ch.title}  （{len(ch.new)} 个新文件）")
        elif args.cmd == "stats":
            print(stats_line(args.n))
        elif args.cmd == "tree":
            print(tree_text(args.n))
        elif args.cmd == "diff":
            print(diff(args.n))
        elif args.cmd == "build":
            validate()
            compile_slice(args.n)
            print(build(args.n, args.out))
        elif args.cmd == "check":
            numbers = args.n or [ch.number for ch in load_chapters()]
            return 0 if check(numbers, args.keep, args.jobs) else 1
        elif args.cmd == "record":
            if args.verify:
                return 0 if check([args.n]) else 1
            print(f"已写入 {record(args.n, args.device, args.model, args.tp).relative_to(REPO)}")
        elif args.cmd == "run":
            ch = get_chapter(args.n)
            env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
            _ensure_models()
            return subprocess.run([sys.executable, str(ch.main)], cwd=REPO, env=env).returncode
    except StepsError as e:
        print(f"错误：{e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
