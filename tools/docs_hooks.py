"""mkdocs 钩子：在构建时把页面里的指令展开成由真实代码生成的内容。

章节页（front matter 写 ``chapter: N``）里可以用下面这些指令，每条单独占一行（可以缩进，
展开的内容沿用同样的缩进，所以能放进 ``=== "标签"`` 或提示框里）：

    [[files]]                                   本章要写的文件、文件统计、文件树
    [[main]]                                    本章的 main.py，加上下载 notebook、在 Colab 中打开
    [[excerpt minisgl/utils/registry.py · Registry.register]]   切片里的一段代码（限定名可省略）
    [[output cpu]]  [[output cuda]]             录制的运行结果（steps.py record 写的）
    [[output cuda qwen3-0.6b-shape]]            换一个模型的录制（steps.py record N --model ...）
    [[output cuda tp2]]                         两块 GPU 上 tp=2 的录制（steps.py record N --tp 2）
    [[test test_ch01_env.py · test_parse_bool]] 本章测试文件里的一个函数
    [[bench results.h200.json]]                 章节目录里的基准测试结果：表格和 matplotlib 画的图
    [[practice]]                                本章的练习题列表

任何页面都可以用 ``[[chapters]]``（按阶段列出全部章节）、
``[[excerpt tools/chat_curriculum.py · score]]``（tools/ 下脚本里的一段代码）和
``[[trainlog tools/demo_chat/train_log.json]]``（一次训练的记录：准确率表格和 matplotlib 画的
损失曲线）。附录页（docs/appendix/ 下，front matter 写 ``chapter: appendix``）自己写一级标题，
导航里排在各章之后；它的 ``[[practice]]`` 列出 front matter 同样写 ``chapter: appendix`` 的练习题。
指令写错、文件或限定名不存在、缺录制、章号不存在，都会抛出 PluginError，写明页面和行号，构建失败；
不认识的 ``[[...]]`` 行同样报错，不会原样留在网页里。

页面的源码先过一遍排版检查（layout_problems）：Python-Markdown 会读错结构的缩进和空行
（列表里缩进 1～3 格的嵌套内容、紧跟在段落后面的列表和表格）让构建失败，写明文件和行号；
练习题的题面在读入时（load_problems）就检查。展开指令之后，去掉中文段落里的软换行
（join_cjk_lines），免得浏览器在中文字之间显示空格。

``extra.repo_url``（本书的 GitHub 仓库）是网站里指向仓库的链接的唯一来源：每页的「编辑此页」、
每章 main 下面的「在 Colab 中打开」和 notebook 第一格里克隆的仓库都由它生成（repo_links）；
没设时这三样都没有。

另外：按章节清单和练习题生成导航（on_config）；为每道练习题生成一页（题面、起始代码、可见测试和
本地判题命令；``extra.browser_editor`` 打开时，浏览器题还有编辑器和在 Pyodide 里判题用的测试——
隐藏测试也随页面下载，只是不显示；参考答案和错误答案永远不进网站）；用 jupytext 把每章的 main.py
转成 notebook，随网站发布在 ``notebooks/chNN.ipynb``。

浏览器判题的前端：tools/web/ 里的 practice.js 由 esbuild 打包（输出在 .cache/editor/，git 忽略），
和 worker.mjs、practice/judge_core.py、npm ci 装好的 Pyodide 运行时一起复制进网站的
``assets/practice/``（on_post_build）；编辑器脚本只插进浏览器题的页面（on_post_page）。
"""

from __future__ import annotations

import functools
import hashlib
import html
import importlib.util
import json
import posixpath
import re
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from mkdocs.exceptions import PluginError

REPO = Path(__file__).resolve().parent.parent
PROBLEMS_DIR = REPO / "practice" / "problems"
CHAPTER_PAGES = "chapters"  # docs/ 下章节页所在的目录
PRACTICE_PAGES = "practice"  # 生成的练习题页面所在的目录（虚拟的，不在 docs/ 里）
NOTEBOOKS = "notebooks"

# 浏览器练习题：前端源码、npm ci 装好的依赖、esbuild 的输出（git 忽略）、网站里的位置
WEB_SRC = REPO / "tools" / "web"
NODE_MODULES = REPO / "node_modules"
EDITOR_CACHE = REPO / ".cache" / "editor"
PRACTICE_ASSETS = "assets/practice"
# Pyodide 运行时只需要这 5 个文件（npm 包里其余的是 source map、类型声明和示例页面）
PYODIDE_RUNTIME = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)
# 浏览器里每次运行的时限（秒），和本地判题的默认时限一样；Pyodide 比 CPython 慢 2～3 倍，
# 参考答案的评测都在 0.5 秒以内，远在其下
BROWSER_TIMEOUT_S = 10

# 单独一行的指令；(?!\[) 排除 [[[ 这类写法
_DIRECTIVE_LINE = re.compile(r"^(?P<indent>[ \t]*)\[\[(?P<body>[^\[\]]*)\]\][ \t]*$")
_ANY_DIRECTIVE = re.compile(r"\[\[[^\[\]\n]*\]\]")
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})")
_SEP = " · "
_KNOWN = ("files", "main", "excerpt", "output", "test", "practice", "chapters", "bench", "trainlog")
_PROBLEM_DIR = re.compile(r"(\d{3})-([a-z0-9]+(?:-[a-z0-9]+)*)")
APPENDIX_PAGES = "appendix"  # docs/ 下附录页所在的目录
APPENDIX = 0  # front matter 的 chapter: appendix 在内部记成 0：附录不是任何一章


class DirectiveError(Exception):
    """指令本身或它引用的东西有问题；调用方补上页面和行号。"""


# ---------------------------------------------------------------- steps.py


def load_steps() -> ModuleType:
    """按路径导入 tools/steps.py。

    已经用 ``import steps`` 导入过时直接用那一个，这样 StepsError 是同一个类。
    """
    existing = sys.modules.get("steps")
    path = REPO / "tools" / "steps.py"
    if existing is not None and Path(getattr(existing, "__file__", "")).resolve() == path:
        return existing
    spec = importlib.util.spec_from_file_location("steps", path)
    if spec is None or spec.loader is None:
        raise PluginError(f"无法导入 {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["steps"] = module  # dataclass 需要在 sys.modules 里找到所在模块
    spec.loader.exec_module(module)
    return module


@functools.cache
def load_judge_core() -> ModuleType:
    """按路径导入 practice/judge_core.py（只用标准库），用它的 list_tests 列出测试名。"""
    path = REPO / "practice" / "judge_core.py"
    spec = importlib.util.spec_from_file_location("_docs_judge_core", path)
    if spec is None or spec.loader is None:
        raise PluginError(f"无法导入 {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass 需要在 sys.modules 里找到所在模块
    spec.loader.exec_module(module)
    return module


def _call(func: Any, *args: Any) -> Any:
    """调用 steps.py 的函数，把它的 StepsError 变成 DirectiveError。"""
    steps = load_steps()
    try:
        return func(*args)
    except steps.StepsError as e:
        raise DirectiveError(str(e)) from None


# ---------------------------------------------------------------- 指令解析


@dataclass(frozen=True)
class Directive:
    name: str
    path: str = ""  # excerpt：minisgl/ 下的路径；test：章节目录里的文件名；output：换用的模型名
    qualname: str = ""
    kind: str = ""  # output：cpu / cuda / cuda.tp2


def parse_directive(body: str) -> Directive:
    """解析 ``[[...]]`` 里面的内容。"""
    text = body.strip()
    name, _, rest = text.partition(" ")
    rest = rest.strip()
    if name not in _KNOWN:
        raise DirectiveError(f"未知的指令 [[{text}]]（支持：{'、'.join(_KNOWN)}）")
    if name in ("files", "main", "practice", "chapters"):
        if rest:
            raise DirectiveError(f"[[{name}]] 不带参数，多出了 {rest!r}")
        return Directive(name)
    if name == "output":
        kind, _, model = rest.partition(" ")
        tp, _, after = model.strip().partition(" ")
        if kind == "cuda" and re.fullmatch(r"tp[2-9]", tp):  # 多块 GPU 的录制
            kind, model = f"{kind}.{tp}", after
        bad_kind = kind not in ("cpu", "cuda") and not kind.startswith("cuda.tp")
        if bad_kind or re.fullmatch(r"tp\d+", tp) and kind == "cpu":
            raise DirectiveError(
                f"[[output ...]] 的参数是 cpu 或 cuda（可再跟 tp2 和一个模型名），不是 {rest!r}"
            )
        return Directive(name, kind=kind, path=model.strip())
    if name == "trainlog":
        if not re.fullmatch(r"tools/[\w./-]+\.json", rest) or ".." in rest:
            raise DirectiveError(
                f"[[trainlog ...]] 写 tools/ 下一个 .json 文件的路径，不是 {rest!r}"
            )
        return Directive(name, path=rest)
    if name == "bench":
        if not re.fullmatch(r"[\w.-]+\.json", rest):
            raise DirectiveError(f"[[bench ...]] 只写章节目录里的一个 .json 文件名，不是 {rest!r}")
        return Directive(name, path=rest)
    # excerpt / test：PATH 或 PATH · QUALNAME
    path, sep, qualname = rest.partition(_SEP.strip())
    path, qualname = path.strip(), qualname.strip()
    if not path or (sep and not qualname):
        raise DirectiveError(f"[[{name} ...]] 的写法是 [[{name} 路径]] 或 [[{name} 路径 · 限定名]]")
    if " " in path:
        raise DirectiveError(f"路径 {path!r} 里有空格（路径和限定名之间用 ' · ' 分隔）")
    if qualname and not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", qualname):
        raise DirectiveError(f"限定名 {qualname!r} 不合法（形如 Registry.register）")
    if name == "excerpt":
        if not path.startswith(("minisgl/", "tools/")) or ".." in path:
            raise DirectiveError(f"摘录的路径要以 minisgl/ 或 tools/ 开头：{path!r}")
    elif "/" in path:
        raise DirectiveError(f"[[test ...]] 只写章节目录里的文件名，不是 {path!r}")
    return Directive(name, path=path, qualname=qualname)


# ---------------------------------------------------------------- Markdown 源码的排版

# Python-Markdown 的列表比 CommonMark 严（编辑器的预览多半是 CommonMark，在那里看起来都对）：
# 列表项里的嵌套列表、表格、代码块和第二段都要缩进 4 格，嵌套 n 层就是 4n 格；
# 列表和表格前面要空一行。
_LIST_ITEM = re.compile(r"^ *(?:\d+\.|[-*+])(?: +|$)")
_TABLE_ROW = re.compile(r"^ *\|")
# 提示框、折叠块、标签页的标题行：紧跟在下面、缩进的内容属于它，不必空行
_CONTAINER = re.compile(r"^ *(?:!!!|\?\?\?\+?|===) ")


def fenced_lines(markdown: str) -> Iterator[tuple[int, str, str]]:
    """逐行交出 (行号, 行, 位置)：位置是 "open"（围栏代码块的开始行）、"body"（块里的行和结束行）
    或 ""（块外）。行号从 1 开始。"""
    fence: str | None = None
    for no, line in enumerate(markdown.split("\n"), 1):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group("fence")[0] == fence[0] and len(m.group("fence")) >= len(fence):
                fence = None
            yield no, line, "body"
        elif m:
            fence = m.group("fence")
            yield no, line, "open"
        else:
            yield no, line, ""


def layout_problems(markdown: str) -> list[tuple[int, str]]:
    """Python-Markdown 会读错结构的缩进和空行：[(行号, 说明)]，行号从 1 开始。

    - 列表里，列表项和空行之后的那一段缩进 1～3 格（不是 4 的倍数）：嵌套的列表项会变成上一层的
      同级项，空行之后的段落、表格、代码块会跑出列表，后面的编号重新开始；
    - 嵌套的列表项比上一项多缩进 8 格以上：它会变成上一项里的普通文字；
    - 列表项或表格紧跟在一段文字后面、中间没有空行：它们会并进那一段。

    围栏代码块里的内容不检查。
    """
    problems: list[tuple[int, str]] = []
    items: list[int] = []  # 打开着的各层列表项的缩进；空表示不在列表里
    prev = ""  # 上一行；空行记为 ""
    block_first = ""  # 当前这一块（空行或标题隔开）的第一行
    for no, line, where in fenced_lines(markdown):
        if where == "body":  # 代码块里的行不检查；块结束之后，结束行算作上一行
            prev = line
            continue
        if not line.strip():
            prev = ""
            continue
        indent = len(line) - len(line.lstrip(" "))
        item = _LIST_ITEM.match(line) is not None
        new_block = prev == ""
        if new_block or prev.lstrip().startswith("#"):
            block_first = line
        if new_block and items and not item and indent <= items[0] and indent % 4 == 0:
            items = []  # 顶格（或者和最外层列表项一样）的一段：列表结束了
        if items:
            if indent % 4 and (item or new_block):
                what = "列表项" if item else "列表里空行之后的这一段"
                problems.append(
                    (no, f"{what}缩进了 {indent} 格：列表里的嵌套内容要缩进 4 的倍数格")
                )
            elif item and indent > items[-1] + 4:
                problems.append(
                    (no, f"列表项比上一层多缩进了 {indent - items[-1]} 格：嵌套一层是 4 格")
                )
        if (
            item
            and not new_block
            and not _LIST_ITEM.match(block_first)
            and not _CONTAINER.match(block_first)
        ):
            problems.append((no, "列表项前面要空一行，否则它会并进上一段"))
            block_first = line  # 后面紧跟着的列表项不再重复报
        if _TABLE_ROW.match(line) and not _TABLE_ROW.match(block_first) and line != block_first:
            problems.append((no, "表格前面要空一行，否则它会并进上一段"))
            block_first = line
        if item:
            items = [i for i in items if i < indent] + [indent]
        elif new_block and items:
            items = [i for i in items if i < indent]
        prev = line
    return problems


def check_layout(markdown: str, where: str, offset: int = 0) -> None:
    """有 layout_problems 报告的问题就抛 DirectiveError，每条写明「文件:行号」。"""
    problems = layout_problems(markdown)
    if problems:
        lines = [f"{where}:{no + offset}: {msg}" for no, msg in problems]
        raise DirectiveError("Markdown 会读错这些地方的结构：\n" + "\n".join(lines))


# 中文段落里的换行：浏览器把 HTML 里的换行显示成一个空格，中文字之间就多出了空格。
_CJK_PUNCT = "\u3000-\u303f\uff00-\uffef\u2014\u2026\u2018\u2019\u201c\u201d"  # 、。，（）——……“”
_CJK = "\u2e80-\u2fff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff" + _CJK_PUNCT
# 下一行以这些开头时是一个新的块（列表项、标题、表格、HTML、提示框、分隔线……），不接
_NEW_BLOCK = re.compile(
    r"(?:\d+\.|[-*+])(?: |$)|[#|<>]|\{:|!!!|\?\?\?|===|\[\[|\[[^\]]+\]:\s|[-_*=]{3,}\s*$"
)


def _soft_break_shows_as_space(end: str, start: str) -> bool:
    """一行以 end 结尾、下一行以 start 开头：中间的换行显示成空格是不是多余的。

    两边都是中文（汉字、假名或全角标点）时多余；一边是全角标点时也多余（"；" 后面不空格）。
    中文和英文单词、数字、代码之间的空格留着。
    """
    if not end or not start or end.isspace() or start.isspace():
        return False
    cjk = re.compile(rf"[{_CJK}]")
    punct = re.compile(rf"[{_CJK_PUNCT}]")
    both = cjk.match(end) and cjk.match(start)
    return bool(both or punct.match(end) or punct.match(start))


def join_cjk_lines(markdown: str) -> str:
    """去掉中文段落里的软换行：把下一行接到这一行后面（见 _soft_break_shows_as_space）。

    围栏代码块、标题、表格行、HTML 行、提示框的标题行不动；下一行是列表项、表格这类新的块时不接；
    行尾有空格（Markdown 的硬换行）时不接。粗体的 ** 不算字符：看的是它里面的字。
    """
    out: list[str] = []
    for _, line, where in fenced_lines(markdown):
        if where:
            out.append(line)
            continue
        text = line.lstrip()
        if out and out[-1].strip() and text:
            prev = out[-1]
            head = prev.lstrip()
            if (
                _soft_break_shows_as_space(prev.rstrip("*")[-1:], text.lstrip("*")[:1])
                and not head.startswith(("#", "|", "<", "{:", "```", "~~~"))
                and not _CONTAINER.match(prev)
                and not _NEW_BLOCK.match(text)
            ):
                out[-1] = prev + text
                continue
        out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------- 练习题


@dataclass(frozen=True)
class Problem:
    number: int
    slug: str
    dir: Path
    title: str
    chapter: int
    difficulty: str
    runtime: str  # browser | local
    body: str

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def code(self) -> str:
        return f"{self.number:03d}"

    @property
    def page(self) -> str:
        return f"{PRACTICE_PAGES}/{self.name}.md"

    @property
    def label(self) -> str:
        return f"{self.code}. {self.title}（{self.difficulty}）"


def _split_front_matter(text: str, where: str) -> tuple[dict[str, Any], str]:
    m = re.match(r"---[ \t]*\n(.*?\n)---[ \t]*\n", text, re.S)
    if not m:
        raise DirectiveError(f"{where}: 缺少 --- 包住的 front matter")
    meta = yaml.safe_load(m.group(1))
    if not isinstance(meta, dict):
        raise DirectiveError(f"{where}: front matter 不是键值对")
    return meta, text[m.end() :]


def chapter_value(value: Any, where: str) -> int:
    """front matter 里的 chapter：章号（正整数），或 appendix（附录，记成 ``APPENDIX``）。"""
    if value == "appendix":
        return APPENDIX
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = APPENDIX
    if n < 1:
        raise DirectiveError(f"{where}: chapter 应该是正整数或 appendix，不是 {value!r}")
    return n


def chapter_label(chapter: int) -> str:
    return "附录" if chapter == APPENDIX else f"第 {chapter} 章"


def _chapter_order(chapter: int) -> tuple[bool, int]:
    """各章按章号排，附录排在最后。"""
    return chapter == APPENDIX, chapter


def load_problems(problems_dir: Path = PROBLEMS_DIR) -> list[Problem]:
    problems: list[Problem] = []
    if not problems_dir.is_dir():
        return problems
    for d in sorted(problems_dir.iterdir()):
        m = _PROBLEM_DIR.fullmatch(d.name)
        if not d.is_dir() or not m:
            continue
        where = f"practice/problems/{d.name}/statement.md"
        statement = d / "statement.md"
        if not statement.is_file():
            raise DirectiveError(f"{where}: 文件不存在")
        text = statement.read_text(encoding="utf-8")
        meta, body = _split_front_matter(text, where)
        check_layout(body, where, offset=text.count("\n") - body.count("\n"))
        missing = [k for k in ("title", "chapter", "difficulty", "runtime") if k not in meta]
        if missing:
            raise DirectiveError(f"{where}: front matter 缺少 {missing}")
        if meta["runtime"] not in ("browser", "local"):
            raise DirectiveError(f"{where}: runtime 只能是 browser 或 local")
        problems.append(
            Problem(
                number=int(m.group(1)),
                slug=m.group(2),
                dir=d,
                title=str(meta["title"]),
                chapter=chapter_value(meta["chapter"], where),
                difficulty=str(meta["difficulty"]),
                runtime=str(meta["runtime"]),
                body=body.strip("\n"),
            )
        )
    return problems


def judge_command(problem: Problem) -> str:
    return f"python practice/judge.py {problem.code} 你的文件.py"


def problem_page(
    problem: Problem, chapter_page: str | None, browser_editor: bool, version: str = "dev"
) -> str:
    """一道练习题的网页：题面、编辑器或起始代码、可见测试、本地判题命令。

    浏览器题（且 ``browser_editor`` 打开）：页面里嵌一段 JSON（起始代码、可见与隐藏测试的源码、
    测试名），practice.js 把它变成编辑器，在浏览器的 Pyodide 里判题——
    所以隐藏测试会随网页下载，只是不显示。
    solution.py 和 wrong_*.py 永远不进网站（网站上的一切都能被下载）。
    """
    starter = (problem.dir / "starter.py").read_text(encoding="utf-8")
    visible_path = problem.dir / "test_visible.py"
    visible = visible_path.read_text(encoding="utf-8") if visible_path.is_file() else ""
    chapter = chapter_label(problem.chapter)
    if chapter_page:
        chapter = f"[{chapter}]({posixpath.relpath(chapter_page, PRACTICE_PAGES)})"
    where = "浏览器题（只用标准库）" if problem.runtime == "browser" else "本地题（需要 torch）"
    mine = f"my_{problem.code}.py"
    editor = browser_editor and problem.runtime == "browser"
    lines = [
        "---",
        f"title: {json.dumps(f'{problem.code}. {problem.title}', ensure_ascii=False)}",
        f"problem: {problem.number}",
        "---",
        "",
        f"# {problem.code}. {problem.title}",
        "",
        f"{chapter} · {problem.difficulty} · {where}",
        "{: .page-meta }",
        "",
        problem.body,
        "",
    ]
    if editor:
        lines += [
            "## 在浏览器里做题",
            "",
            "在下面的编辑器里写代码，点「运行测试」（或按 Ctrl/⌘ + Enter）："
            "代码和测试在你的浏览器里、用 Pyodide（编译成 WebAssembly 的 Python）运行，"
            "不联网，也不上传任何东西。"
            f"每次运行的时限是 {BROWSER_TIMEOUT_S} 秒；编辑器里的代码会自动保存在这个浏览器里，"
            "「重置代码」恢复成起始代码。",
            "",
            editor_html(problem, version),
            "",
        ]
    else:
        lines += ["## 起始代码", "", *_fence("python", starter, "starter.py"), ""]
    if visible:
        lines += [
            '??? example "可见测试（test_visible.py）"',
            "",
            *_indent(_fence("python", visible, "test_visible.py"), "    "),
            "",
            "    判题时还会运行一组隐藏测试（test_hidden.py），覆盖更多边界情况。",
            "",
        ]
    if editor:
        lines += [
            '!!! note "隐藏测试只是不显示，并不保密"',
            "",
            "    为了能在浏览器里判题，隐藏测试的代码随网页一起下载到了你的浏览器里："
            "页面只显示它们的名字和结果，但并不保密。参考答案不在网站上。",
            "",
            '!!! tip "离线阅读时要用本地服务器打开网站"',
            "",
            "    判题要启动 Web Worker，直接从磁盘打开的网页（`file://`）做不到。在仓库根目录运行 "
            "`make docs && python -m http.server -d site`（或 `.venv/bin/mkdocs serve`），"
            "再打开 <http://127.0.0.1:8000/>。",
            "",
        ]
    lines += [
        "## 在本地判题" if editor else "## 判题",
        "",
        _browser_line(problem, browser_editor),
        "",
    ]
    lines += [
        *_fence(
            "bash",
            f"cp practice/problems/{problem.name}/starter.py {mine}\n"
            f"# ……在 {mine} 里写你的实现……\n"
            f"python practice/judge.py {problem.code} {mine}\n",
        ),
        "",
        "每个测试逐个显示 PASS / FAIL，最后一行是 `N passed, M failed`；全部通过时退出码为 0。",
        "",
    ]
    return "\n".join(lines)


def problem_spec(problem: Problem, version: str) -> dict[str, Any]:
    """编辑器需要的一切：起始代码、测试文件（可见在前、隐藏在后）和每个文件里的测试名。"""
    judge_core = load_judge_core()
    tests = []
    names: dict[str, list[str]] = {}
    for name, hidden in ((judge_core.VISIBLE_TESTS, False), (judge_core.HIDDEN_TESTS, True)):
        source = (problem.dir / name).read_text(encoding="utf-8")
        tests.append({"name": name, "source": source, "hidden": hidden})
        try:
            names[name] = judge_core.list_tests(source)
        except SyntaxError as e:
            raise DirectiveError(
                f"practice/problems/{problem.name}/{name}: 语法错误：{e}"
            ) from None
    return {
        "id": problem.name,
        "title": f"{problem.code}. {problem.title}",
        "starter": (problem.dir / "starter.py").read_text(encoding="utf-8"),
        "tests": tests,
        "names": names,
        "timeoutS": BROWSER_TIMEOUT_S,
        "version": version,
    }


def editor_html(problem: Problem, version: str) -> str:
    """一行原始 HTML（Markdown 不会改动它）：JSON 数据 + 没有 JavaScript 时显示的起始代码。"""
    spec = problem_spec(problem, version)
    # JSON 放进 <script> 里：把 < > & 都转义，源码里的 "</script>" 或 "<!--" 就不会提前结束它
    data = json.dumps(spec, ensure_ascii=False)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    starter = html.escape(spec["starter"]).replace("\n", "&#10;")
    rows = min(30, spec["starter"].count("\n") + 2)
    return (
        f'<div class="practice" data-problem="{problem.name}" data-search-exclude>'
        f'<script type="application/json" class="practice-data">{data}</script>'
        f'<textarea class="practice-fallback" rows="{rows}" readonly spellcheck="false">'
        f"{starter}</textarea>"
        '<p class="practice-noscript">编辑器需要 JavaScript；也可以用下面的命令在本地判题。</p>'
        "</div>"
    )


def _browser_line(problem: Problem, browser_editor: bool) -> str:
    if problem.runtime == "local":
        return "这道题需要 torch（浏览器里的 Pyodide 没有 torch），在本地判题："
    if browser_editor:
        return "在浏览器里直接写代码、跑测试；也可以在本地用 `python practice/judge.py` 判题："
    return "这道题只用标准库，浏览器里的编辑器和判题即将上线；现在请在本地判题："


def practice_index(
    problems: list[Problem], titles: dict[int, str], browser_editor: bool = False
) -> str:
    browser = (
        "「浏览器题」只用标准库，在题目页里直接写代码、在浏览器里判题，也可以在本地判题；"
        if browser_editor
        else "「浏览器题」只用标准库；"
    )
    lines = [
        "# 练习题",
        "",
        "每章配几道练习题，判题器把你的代码和题目的测试一起运行（`practice/judge.py`）。",
        browser + "「本地题」需要 torch，在仓库的 `.venv` 里判题。",
        "",
        "```bash",
        "python practice/judge.py --list               # 列出所有题目",
        "python practice/judge.py 001 你的文件.py       # 评测一道题",
        "```",
        "",
    ]
    for n in sorted({p.chapter for p in problems}, key=_chapter_order):
        lines += [f"## {chapter_label(n)} · {titles.get(n, '')}".rstrip(" ·"), ""]
        for p in problems:
            if p.chapter == n:
                kind = "浏览器题" if p.runtime == "browser" else "本地题"
                lines.append(f"- [{p.label}]({posixpath.relpath(p.page, PRACTICE_PAGES)}) · {kind}")
        lines.append("")
    if not problems:
        lines.append("还没有练习题。")
    return "\n".join(lines)


# ---------------------------------------------------------------- 生成 markdown 的小工具


def _fence(lang: str, code: str, title: str = "") -> list[str]:
    """围栏代码块；代码里有反引号时用更长的围栏。"""
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    head = f'{fence}{lang} title="{title}"' if title else f"{fence}{lang}"
    return [head, *code.rstrip("\n").split("\n"), fence]


def _indent(lines: list[str], indent: str) -> list[str]:
    return [indent + line if line else "" for line in lines]


@dataclass
class Context:
    """展开指令需要的站点信息。"""

    colab_base: str = ""
    browser_editor: bool = False
    page_src: str = ""  # 当前页面相对 docs/ 的路径，用来算相对链接
    chapter_pages: dict[int, str] | None = None  # 章号 → 章节页路径

    def link(self, target: str) -> str:
        return posixpath.relpath(target, posixpath.dirname(self.page_src) or ".")


def expand_directive(d: Directive, chapter: int | None, ctx: Context) -> list[str]:
    steps = load_steps()
    if d.name == "chapters":
        return _chapters_list(ctx)
    if d.name == "excerpt" and d.path.startswith("tools/"):
        return _tools_excerpt(d.path, d.qualname)
    if d.name == "trainlog":
        return _train_log(REPO / d.path, REPO)
    if d.name == "practice" and chapter == APPENDIX:
        return _practice_list(chapter, ctx)
    if chapter is None or chapter == APPENDIX:
        raise DirectiveError(f"[[{d.name}]] 只能用在 front matter 写了 chapter: N 的章节页里")
    c = _call(steps.get_chapter, chapter)
    if d.name == "files":
        return [
            _md_escape(_call(steps.new_files_line, chapter)),
            "",
            _md_escape(_call(steps.stats_line, chapter)),
            "",
            *_fence("text", _call(steps.tree_text, chapter)),
        ]
    if d.name == "main":
        rel = c.main.relative_to(steps.REPO).as_posix()
        if not c.main.is_file():
            raise DirectiveError(f"{rel} 不存在")
        nb = notebook_name(chapter)
        links = f'[下载 notebook]({ctx.link(nb)}){{ download="{posixpath.basename(nb)}" }}'
        if ctx.colab_base:
            links += f" · [在 Colab 中打开]({ctx.colab_base.rstrip('/')}/{nb}){{ target=_blank }}"
        return [*_fence("python", c.main.read_text(encoding="utf-8"), rel), "", links]
    if d.name == "excerpt":
        rel = d.path.removeprefix(f"{steps.PACKAGE}/")
        ex = _call(steps.excerpt, chapter, rel, d.qualname)
        title = d.path
        if d.qualname:
            title += f"{_SEP}{d.qualname}（第 {ex.start}～{ex.end} 行）"
        return _fence("python", ex.code, title)
    if d.name == "test":
        path = c.dir / d.path
        label = path.relative_to(steps.REPO).as_posix()
        if not path.is_file():
            raise DirectiveError(f"{label} 不存在")
        ex = _call(steps.excerpt_text, path.read_text(encoding="utf-8"), d.qualname, label)
        title = f"{label}{_SEP}{d.qualname}" if d.qualname else label
        return _fence("python", ex.code, title)
    if d.name == "bench":
        return _bench(c.dir / d.path, steps.REPO)
    if d.name == "output":
        header, body = _call(steps.read_recording, chapter, d.kind, d.path or None)
        keys = ("设备", "模型", "torch", "日期")
        keys = ("命令", *keys) if ".tp" in d.kind else keys  # 命令里有 MINISGL_TP=N
        meta = "；".join(f"{key}：{header[key]}" for key in keys)
        # attr_list 的写法：放进 === 标签页（缩进）里也还是一个普通段落，不会套出 <p><p>
        return [_md_escape(meta), "{: .page-meta }", "", *_fence("text", plain_output(body))]
    if d.name == "practice":
        return _practice_list(chapter, ctx)
    raise DirectiveError(f"未实现的指令 {d.name}")  # pragma: no cover - parse_directive 已拦住


_TABLE_RULE = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+$")
_BOLD = re.compile(r"\*\*([^*\n]+?)\*\*")
_CODE = re.compile(r"`([^`\n]+)`")


def _width(text: str) -> int:
    """等宽字体里占几列：中文等全角字符两列。"""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def plain_output(body: str) -> str:
    """录制里程序打印的 markdown（第 19 章 main 打印的结果表）在代码块里显示成纯文本。

    表格排成按列对齐的文字（第一列左对齐，其余右对齐），**粗体** 和 `代码` 去掉标记。
    只改显示，不改录制文件（录制和程序的输出逐字比较）；没有 markdown 的录制原样返回。
    """
    lines = body.split("\n")
    if not any(_TABLE_RULE.match(line) for line in lines):
        return body
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and lines[i].startswith("|") and _TABLE_RULE.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            rows = [
                [_strip_md(c.strip()) for c in line.strip().strip("|").split("|")]
                for k, line in enumerate(lines[i:j])
                if k != 1
            ]
            widths = [
                max(_width(row[c]) for row in rows if c < len(row)) for c in range(len(rows[0]))
            ]
            for k, row in enumerate(rows):
                cells = []
                for c, cell in enumerate(row):
                    pad = " " * (widths[c] - _width(cell)) if c < len(widths) else ""
                    cells.append(cell + pad if c == 0 else pad + cell)
                out.append("  ".join(cells).rstrip())
                if k == 0:
                    out.append("  ".join("-" * w for w in widths))
            i = j
        else:
            out.append(_strip_md(lines[i]))
            i += 1
    return "\n".join(out)


def _strip_md(text: str) -> str:
    return _CODE.sub(r"\1", _BOLD.sub(r"\1", text))


def _bench(path: Path, repo: Path) -> list[str]:
    """基准测试的 JSON → 表格 + 内嵌的 SVG 图（构建时用 matplotlib 画，不提交图片）。"""
    from minisgl.benchmark.report import load_results, render_markdown, render_plots

    label = path.relative_to(repo).as_posix()
    if not path.is_file():
        raise DirectiveError(f"{label} 不存在")
    try:
        results = load_results(path)
        lines = [f"结果文件：`{label}`", "", *render_markdown(results).splitlines()]
        svg = render_plots(results)
    except (ValueError, KeyError) as e:
        raise DirectiveError(f"{label}: {e}") from None
    if svg:
        lines += _plot_block(svg)
    return lines


def _plot_block(svg: str) -> list[str]:
    """内嵌的 SVG 图：原样的 HTML 块不能有空行，也不能缩进，所以压成一行。"""
    return ["", '<div class="bench-plot">' + " ".join(svg.split("\n")) + "</div>", ""]


def _tools_excerpt(path: str, qualname: str) -> list[str]:
    """tools/ 下脚本里的一段代码（不属于任何一章，任何页面都能用）。"""
    steps = load_steps()
    file = REPO / path
    if not file.is_file():
        raise DirectiveError(f"{path} 不存在")
    ex = _call(steps.excerpt_text, file.read_text(encoding="utf-8"), qualname, path)
    title = f"{path}{_SEP}{qualname}（第 {ex.start}～{ex.end} 行）" if qualname else path
    return _fence("python", ex.code, title)


TASK_NAMES = {
    "add_sub": "加减法",
    "sort": "排序",
    "reverse": "倒序",
    "repeat": "复述",
    "greeting": "打招呼",
    "other": "其他",
}


def _train_log(path: Path, repo: Path) -> list[str]:
    """训练记录（tools/train_chat_model.py 写的 train_log.json）→ 说明、准确率表格和损失曲线。"""
    label = path.relative_to(repo).as_posix()
    if not path.is_file():
        raise DirectiveError(f"{label} 不存在")
    try:
        log = json.loads(path.read_text(encoding="utf-8"))
        minutes = log["seconds"] / 60
        lines = [
            f"记录文件：`{label}`。命令 `{log['command']}`；{log['device']}，torch {log['torch']}；"
            f"{log['steps']:,} 步 × 每批 {log['batch']} 题，训练 {log['seconds']:g} 秒"
            f"（{minutes:.1f} 分钟），峰值学习率 {log['lr']:g}；"
            f"{log['parameters']:,} 个参数，训练的嵌入行 {log['trainable_rows']} 行，"
            f"发布的权重文件 {log['weights_bytes'] / 1e6:.1f} MB。",
            "",
            f"评测：种子 {log['eval_seed']}（训练时没见过的题），每类 {log['eval_per_task']} 题，"
            "贪心生成，拼好的完整模型：",
            "",
            "| 任务 | 准确率 | 答对 |",
            "|---|---:|---:|",
        ]
        for task, acc in log["accuracy"].items():
            right = round(acc * log["eval_per_task"])
            name = f"{TASK_NAMES.get(task, task)}（`{task}`）"
            lines.append(f"| {name} | {acc * 100:.1f} % | {right} / {log['eval_per_task']} |")
        svg = _loss_plot([(int(s), float(v)) for s, v in log["loss"]])
    except (ValueError, KeyError, TypeError) as e:
        raise DirectiveError(f"{label}: {e}") from None
    return [*lines, *_plot_block(svg)]


def _loss_plot(points: list[tuple[int, float]]) -> str:
    """损失曲线（对数纵轴）的内嵌 SVG，和第 19 章的基准测试图同一种样式。"""
    from matplotlib.ticker import FuncFormatter

    from minisgl.benchmark.report import svg_text, web_figure

    with web_figure() as new_figure:
        fig, ax = new_figure(3.3)
        ax.plot([s for s, _ in points], [v for _, v in points], "o-", markersize=3)
        ax.set(yscale="log", xlabel="训练步数", ylabel="回答 token 上的交叉熵")
        ax.set_title("演示模型的训练损失（每 100 步记一次，单个批次）")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(True, which="major")
        return svg_text(fig)


def _md_escape(text: str) -> str:
    """普通文字里的 _ * ` 会被当成 markdown 标记（__init__.py 会变成粗体的 init.py）。"""
    return re.sub(r"([\\`*_])", r"\\\1", text)


def _practice_list(chapter: int, ctx: Context) -> list[str]:
    problems = [p for p in load_problems_cached() if p.chapter == chapter]
    here = "这篇附录" if chapter == APPENDIX else "本章"
    if not problems:
        return [f"{here}暂时没有练习题。"]
    lines = [f"{here}共 {len(problems)} 道练习题：", ""]
    for p in problems:
        kind = "浏览器题" if p.runtime == "browser" else "本地题，需要 torch"
        lines.append(f"- [{p.label}]({ctx.link(p.page)})：{kind}；本地判题 `{judge_command(p)}`")
    lines.append("")
    if any(p.runtime == "browser" for p in problems):
        if ctx.browser_editor:
            lines.append(
                "浏览器题点开题目页，在浏览器里直接写代码、跑测试（Python 在你的浏览器里运行，"
                "不联网）；也可以在本地用 `python practice/judge.py` 判题。"
            )
        else:
            lines.append(
                "浏览器题只用标准库，网页里的编辑器和判题即将上线；现在请用上面的命令在本地判题。"
            )
    return lines


def _chapters_list(ctx: Context) -> list[str]:
    steps = load_steps()
    pages = ctx.chapter_pages or {}
    lines: list[str] = []
    part = None
    for c in _call(steps.load_chapters):
        if c.part != part:
            if part is not None:
                lines.append("")
            lines += [f"**{c.part}**", ""]
            part = c.part
        title = f"第 {c.number} 章 · {c.title}"
        lines.append(
            f"- [{title}]({ctx.link(pages[c.number])})" if c.number in pages else f"- {title}"
        )
    return lines


def notebook_name(chapter: int) -> str:
    return f"{NOTEBOOKS}/ch{chapter:02d}.ipynb"


def expand_markdown(
    markdown: str, chapter: int | None, page: str, ctx: Context, offset: int = 0
) -> str:
    """展开一页里的全部指令；出错时抛 PluginError，写明「页面:行号」。

    offset 是 front matter 占的行数，让报错的行号对应源文件。围栏代码块里的内容原样保留。
    """
    out: list[str] = []
    for no, line, in_fence in fenced_lines(markdown):
        where = f"{page}:{no + offset}"
        if in_fence:
            out.append(line)
            continue
        dm = _DIRECTIVE_LINE.match(line)
        try:
            if dm:
                d = parse_directive(dm.group("body"))
                out += _indent(expand_directive(d, chapter, ctx), dm.group("indent"))
                continue
            stray = _ANY_DIRECTIVE.search(line)
            if stray and stray.group(0)[2:-2].split(" ")[0].strip() in _KNOWN:
                raise DirectiveError(f"指令 {stray.group(0)} 必须单独占一行")
        except DirectiveError as e:
            raise PluginError(f"{where}: {e}") from None
        out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------- notebook


def main_to_notebook(chapter: int, repo_git: str = "") -> str:
    """用 jupytext 把 py:percent 的 main.py 转成 .ipynb 的 JSON 文本。"""
    import jupytext
    from nbformat.v4 import new_code_cell, new_markdown_cell

    steps = load_steps()
    c = _call(steps.get_chapter, chapter)
    nb = jupytext.reads(c.main.read_text(encoding="utf-8"), fmt="py:percent")
    rel = c.main.relative_to(steps.REPO).as_posix()
    intro = (
        f"这个 notebook 由 `{rel}` 用 jupytext 生成。它需要本书仓库里的 `minisgl` 包："
        "在本地，用 `make run` 建好的 `.venv` 在仓库根目录打开它；"
    )
    setup: list[Any] = []
    if repo_git:
        intro += "在 Colab 里，先运行下面这一格：克隆仓库、安装，需要时离线生成内嵌模型。"
        model = "\n" + _COLAB_MODEL if getattr(c, "model", "") else ""
        code = _COLAB_SETUP.format(repo_git=repo_git, model=model).strip()
        setup.append(new_code_cell(code))
    else:
        intro += "在 Colab 里，先克隆仓库并 `pip install -e .`。"
    nb.cells[:0] = [new_markdown_cell(intro), *setup]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata.pop("jupytext", None)
    return jupytext.writes(nb, fmt="ipynb")


# Colab 里的第一格：克隆仓库、安装。editable 安装要重启内核才生效，所以同时把仓库放进 sys.path；
# 重跑这一格时已经在仓库根目录里，不会再克隆一次。
_COLAB_SETUP = """
import os
import subprocess
import sys
from collections.abc import Iterator

if "google.colab" in sys.modules and not os.path.isfile("tools/steps.py"):
    if not os.path.isdir("minisgl-book"):
        subprocess.run(["git", "clone", "--depth", "1", "{repo_git}", "minisgl-book"], check=True)
        pip = [sys.executable, "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "-e", "minisgl-book[dev]"], check=True)
    os.chdir("minisgl-book")
if os.path.isfile("tools/steps.py"):  # 在仓库根目录
    sys.path.insert(0, os.getcwd()){model}
"""
_COLAB_MODEL = """\
    # 离线生成内嵌的小模型到 models/（约 3 秒，不联网）
    subprocess.run([sys.executable, "tools/make_tiny_model.py", "--ensure"], check=True)"""


# ---------------------------------------------------------------- 页面信息


def _front_matter_lines(source: str, markdown: str) -> int:
    """front matter 占了源文件的多少行（mkdocs 传给钩子的 markdown 已经去掉了它）。"""
    if markdown and source.endswith(markdown):
        return source.count("\n", 0, len(source) - len(markdown))
    return 0


def chapter_pages(docs_dir: Path) -> dict[int, str]:
    """docs/chapters/*.md 里 front matter 写了 chapter: N 的页面：章号 → 相对 docs/ 的路径；
    docs/appendix/*.md 里写了 chapter: appendix 的那一页记在 ``APPENDIX`` 下。"""
    pages: dict[int, str] = {}
    candidates = [
        *(docs_dir / CHAPTER_PAGES).glob("*.md"),
        *(docs_dir / APPENDIX_PAGES).glob("*.md"),
    ]
    for path in sorted(candidates):
        rel = path.relative_to(docs_dir).as_posix()
        text = path.read_text(encoding="utf-8")
        if not text.startswith("---"):
            continue
        try:
            meta, _ = _split_front_matter(text, rel)
        except DirectiveError as e:
            raise PluginError(str(e)) from None
        if "chapter" in meta:
            try:
                n = chapter_value(meta["chapter"], rel)
            except DirectiveError as e:
                raise PluginError(str(e)) from None
            if (n == APPENDIX) != rel.startswith(f"{APPENDIX_PAGES}/"):
                raise PluginError(f"{rel}: chapter: appendix 的页面放在 docs/{APPENDIX_PAGES}/ 下")
            if n in pages:
                raise PluginError(f"{rel}: {chapter_label(n)}已经有页面 {pages[n]}")
            pages[n] = rel
    return pages


# ---------------------------------------------------------------- 浏览器练习题的前端


def _web_sources() -> list[Path]:
    return [WEB_SRC / "practice.js", REPO / "package.json", REPO / "package-lock.json"]


def check_web_deps() -> None:
    """浏览器练习题需要 npm ci 装好的 Pyodide 和 esbuild；缺了就让构建失败，并说清楚怎么办。"""
    missing = [
        f"node_modules/{p.relative_to(NODE_MODULES).as_posix()}"
        for p in [NODE_MODULES / "pyodide" / f for f in PYODIDE_RUNTIME]
        + [NODE_MODULES / ".bin" / "esbuild"]
        if not p.is_file()
    ]
    if missing:
        raise PluginError(
            f"浏览器练习题需要 npm 包，但缺少 {missing[0]} 等 {len(missing)} 个文件："
            "先在仓库根目录运行 npm ci（make docs、make test 会自动运行），"
            "或者在 mkdocs.yml 里把 extra.browser_editor 设为 false"
        )
    # 装好的 Pyodide 必须是 package-lock.json 钉住的版本（JS、wasm 和标准库要配套）
    lock = json.loads((REPO / "package-lock.json").read_text(encoding="utf-8"))
    pinned = lock["packages"]["node_modules/pyodide"]["version"]
    installed = json.loads((NODE_MODULES / "pyodide" / "package.json").read_text(encoding="utf-8"))
    if installed["version"] != pinned:
        raise PluginError(
            f"node_modules 里的 pyodide 是 {installed['version']}，"
            f"package-lock.json 钉的是 {pinned}：先运行 npm ci（或 make docs）"
        )


def build_editor_bundle() -> Path:
    """用 esbuild 把 tools/web/practice.js 和 CodeMirror 打包成一个文件（源码没变就不重新打包）。"""
    out = EDITOR_CACHE / "practice.js"
    sources = _web_sources()
    if out.is_file() and all(out.stat().st_mtime >= p.stat().st_mtime for p in sources):
        return out
    EDITOR_CACHE.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(NODE_MODULES / ".bin" / "esbuild"),
        str(WEB_SRC / "practice.js"),
        "--bundle",
        "--minify",
        "--format=iife",
        "--target=es2020",
        "--log-level=warning",
        f"--outfile={out}",
    ]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        raise PluginError(f"esbuild 打包 tools/web/practice.js 失败：\n{r.stderr.strip()}")
    return out


def assets_version(bundle: Path) -> str:
    """前端文件的指纹：拼进 worker.mjs 和 judge_core.py 的地址，更新后浏览器不会用旧缓存。"""
    h = hashlib.sha256()
    files = [bundle, WEB_SRC / "worker.mjs", REPO / "practice" / "judge_core.py"]
    files.append(NODE_MODULES / "pyodide" / "package.json")
    for path in files:
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def _copy_if_changed(src: Path, dst: Path) -> None:
    if dst.is_file():
        a, b = src.stat(), dst.stat()
        if a.st_size == b.st_size and int(a.st_mtime) == int(b.st_mtime):
            return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def copy_practice_assets(site_dir: Path, bundle: Path) -> None:
    """把编辑器、Worker、judge_core.py 和 Pyodide 运行时放进网站的 assets/practice/。"""
    out = site_dir / PRACTICE_ASSETS
    _copy_if_changed(bundle, out / "practice.js")
    _copy_if_changed(WEB_SRC / "worker.mjs", out / "worker.mjs")
    _copy_if_changed(REPO / "practice" / "judge_core.py", out / "judge_core.py")
    for name in PYODIDE_RUNTIME:
        _copy_if_changed(NODE_MODULES / "pyodide" / name, out / "pyodide" / name)


# ---------------------------------------------------------------- mkdocs 事件


@dataclass
class _BuildState:
    docs_dir: Path
    colab_base: str  # 「在 Colab 中打开」的链接前缀；空串表示不加这个链接
    repo_git: str  # notebook 第一格在 Colab 里克隆的仓库；空串表示不加这一格
    browser_editor: bool
    chapter_pages: dict[int, str]
    problems: list[Problem]
    bundle: Path | None = None  # esbuild 打包好的编辑器（browser_editor 打开时）
    version: str = "dev"
    edit_base: str = ""  # 「编辑此页」的链接前缀（仓库里某个分支的根目录）；空串表示不加


_state: _BuildState | None = None


def _get_state() -> _BuildState:
    if _state is None:
        raise PluginError("docs_hooks: on_config 没有运行")
    return _state


def on_config(config: Any) -> Any:
    """每次构建开始：清空 steps.py 的缓存（mkdocs serve 时源码会变），按章节清单生成导航。"""
    global _state
    steps = load_steps()
    steps.reset_caches()
    load_problems_cached.cache_clear()
    docs_dir = Path(config["docs_dir"])
    extra = config.get("extra") or {}
    try:
        chapters = steps.load_chapters()
        problems = load_problems_cached()
    except (steps.StepsError, DirectiveError) as e:
        raise PluginError(str(e)) from None
    pages = chapter_pages(docs_dir)
    known = {c.number for c in chapters} | {APPENDIX}
    for n, rel in pages.items():
        if n not in known:
            raise PluginError(f"{rel}: chapter: {n}，但 chapters/ 下没有第 {n} 章")
    for p in problems:
        if p.chapter not in known:
            raise PluginError(f"practice/problems/{p.name}: chapter: {p.chapter} 不存在")
        if p.chapter == APPENDIX and APPENDIX not in pages:
            raise PluginError(f"practice/problems/{p.name}: chapter: appendix，但没有附录页")
    browser_editor = bool(extra.get("browser_editor", False))
    bundle, version = None, "dev"
    if browser_editor and any(p.runtime == "browser" for p in problems):
        check_web_deps()
        bundle = build_editor_bundle()
        version = assets_version(bundle)
    try:
        links = repo_links(extra, str(config.get("remote_branch") or "gh-pages"))
    except DirectiveError as e:
        raise PluginError(f"mkdocs.yml: {e}") from None
    _state = _BuildState(
        docs_dir=docs_dir,
        colab_base=links.colab_base,
        repo_git=links.repo_git,
        edit_base=links.edit_base,
        browser_editor=browser_editor,
        chapter_pages=pages,
        problems=problems,
        bundle=bundle,
        version=version,
    )
    if not config.get("nav"):
        config["nav"] = build_nav(chapters, pages, problems)
    return config


@dataclass(frozen=True)
class RepoLinks:
    """由 ``extra.repo_url`` 推出来的三样东西；没设仓库地址时都是空串。"""

    colab_base: str = ""  # + /notebooks/chNN.ipynb 就是「在 Colab 中打开」的链接
    repo_git: str = ""  # notebook 的第一格在 Colab 里克隆它
    edit_base: str = ""  # + 仓库里的路径就是「编辑此页」的链接


def repo_links(extra: dict[str, Any], site_branch: str = "gh-pages") -> RepoLinks:
    """``extra.repo_url``（GitHub 仓库的地址）和 ``extra.repo_branch``（源码所在的分支）。

    notebook 随网站发布在 ``site_branch``（mkdocs 的 remote_branch，gh-deploy 推送的分支）上，
    Colab 从那里打开它。
    """
    stale = [key for key in ("colab_base", "repo_git") if key in extra]
    if stale:
        raise DirectiveError(f"extra.{stale[0]} 不再使用，改写 extra.repo_url")
    url = str(extra.get("repo_url") or "").strip().rstrip("/")
    if not url:
        return RepoLinks()
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+)", url)
    if not m or m.group(2).endswith(".git"):
        raise DirectiveError(
            f"extra.repo_url 要写成 https://github.com/OWNER/REPO（不带 .git），不是 {url!r}"
        )
    branch = str(extra.get("repo_branch") or "main")
    owner, name = m.groups()
    return RepoLinks(
        colab_base=f"https://colab.research.google.com/github/{owner}/{name}/blob/{site_branch}",
        repo_git=f"{url}.git",
        edit_base=f"{url}/edit/{branch}",
    )


def edit_url(state: _BuildState, src: str, generated: bool) -> str | None:
    """一页的「编辑此页」链接：练习题页指向题面 statement.md，docs/ 里的页面指向它自己。"""
    if not state.edit_base:
        return None
    if generated:
        problem = next((p for p in state.problems if p.page == src), None)
        if problem is None:  # 练习题总览这类完全生成的页面没有源文件
            return None
        return f"{state.edit_base}/practice/problems/{problem.name}/statement.md"
    try:
        docs = state.docs_dir.resolve().relative_to(REPO).as_posix()
    except ValueError:  # 测试里复制到别处的 docs/
        docs = "docs"
    return f"{state.edit_base}/{docs}/{src}"


@functools.cache
def load_problems_cached() -> list[Problem]:
    return load_problems()


def build_nav(chapters: list[Any], pages: dict[int, str], problems: list[Problem]) -> list[Any]:
    """首页；每个阶段一节，下面是有页面的章；附录；最后是练习题（按章分组，附录的排在最后）。"""
    nav: list[Any] = [{"首页": "index.md"}]
    parts: dict[str, list[Any]] = {}
    for c in chapters:
        if c.number in pages:
            parts.setdefault(c.part, []).append({f"{c.number}. {c.title}": pages[c.number]})
    nav += [{part: items} for part, items in parts.items()]
    if APPENDIX in pages:  # 标题取自页面自己的一级标题
        nav.append({"附录": [pages[APPENDIX]]})
    practice: list[Any] = [{"全部练习题": f"{PRACTICE_PAGES}/index.md"}]
    for n in sorted({p.chapter for p in problems}, key=_chapter_order):
        items = [{p.label: p.page} for p in problems if p.chapter == n]
        practice.append({chapter_label(n): items})
    nav.append({"练习题": practice})
    return nav


def on_files(files: Any, config: Any) -> Any:
    """生成练习题页面、练习题总览和每章的 notebook。"""
    from mkdocs.structure.files import File

    steps = load_steps()
    state = _get_state()
    titles = {c.number: c.title for c in steps.load_chapters()}
    for p in state.problems:
        chapter_page = state.chapter_pages.get(p.chapter)
        try:
            content = problem_page(p, chapter_page, state.browser_editor, state.version)
        except DirectiveError as e:
            raise PluginError(str(e)) from None
        files.append(File.generated(config, p.page, content=content))
    index = practice_index(state.problems, titles, state.browser_editor)
    files.append(File.generated(config, f"{PRACTICE_PAGES}/index.md", content=index))
    for c in steps.load_chapters():
        try:
            nb = main_to_notebook(c.number, state.repo_git)
        except DirectiveError as e:
            raise PluginError(str(e)) from None
        files.append(File.generated(config, notebook_name(c.number), content=nb))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    state = _get_state()
    src = page.file.src_uri
    meta = page.meta or {}
    chapter: int | None = None
    prefix: list[str] = []
    if meta.get("chapter") == "appendix":
        chapter = APPENDIX  # 附录页自己写一级标题
    elif "chapter" in meta:
        try:
            chapter = int(meta["chapter"])
        except (TypeError, ValueError):
            raise PluginError(f"{src}: front matter 的 chapter 应该是整数") from None
        steps = load_steps()
        try:
            c = steps.get_chapter(chapter)
        except steps.StepsError as e:
            raise PluginError(f"{src}: {e}") from None
        # 标题与所属阶段都来自 chapter.toml，页面里不写 H1（代码块里的 # 是注释）
        if any(not where and line.startswith("# ") for _, line, where in fenced_lines(markdown)):
            raise PluginError(
                f"{src}: 章节页不写一级标题，标题来自 chapters/{c.label}/chapter.toml"
            )
        prefix = [
            f'<p class="chapter-part">{c.part} · 第 {c.number} 章</p>',
            "",
            f"# {c.title}",
            "",
        ]
        page.meta.setdefault("title", c.title)
    ctx = Context(
        colab_base=state.colab_base,
        browser_editor=state.browser_editor,
        page_src=src,
        chapter_pages=state.chapter_pages,
    )
    offset = _front_matter_lines(page.file.content_string, markdown)
    try:
        check_layout(markdown, src, offset)
    except DirectiveError as e:
        raise PluginError(str(e)) from None
    body = expand_markdown(markdown, chapter, src, ctx, offset)
    page.edit_url = edit_url(state, src, page.file.generated_by is not None)
    return join_cjk_lines("\n".join(prefix) + body)


def on_post_page(output: str, page: Any, config: Any) -> str:
    """浏览器题的页面才加载编辑器脚本（约 470 KB），其他页面不加载。"""
    state = _get_state()
    if state.bundle is None or 'class="practice"' not in output:
        return output
    from mkdocs.utils import get_relative_url

    src = get_relative_url(f"{PRACTICE_ASSETS}/practice.js", page.url)
    tag = f'<script src="{html.escape(src)}?v={state.version}"></script>'
    head, sep, tail = output.rpartition("</body>")
    if not sep:
        raise PluginError(f"{page.file.src_uri}: 页面里没有 </body>，放不下编辑器脚本")
    return f"{head}{tag}\n{sep}{tail}"


def on_post_build(config: Any) -> None:
    """把浏览器判题用的文件（编辑器、Worker、judge_core.py、Pyodide 运行时）复制进网站。"""
    state = _get_state()
    if state.bundle is not None:
        copy_practice_assets(Path(config["site_dir"]), state.bundle)
