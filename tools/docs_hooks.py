"""mkdocs 钩子：在构建时把页面里的指令展开成由真实代码生成的内容。

章节页（front matter 写 ``chapter: N``）里可以用下面这些指令，每条单独占一行（可以缩进，
展开的内容沿用同样的缩进，所以能放进 ``=== "标签"`` 或提示框里）：

    [[files]]                                   本章要写的文件、文件统计、文件树
    [[main]]                                    本章的 main.py，加上下载 notebook、在 Colab 中打开
    [[excerpt minisgl/utils/registry.py · Registry.register]]   切片里的一段代码（限定名可省略）
    [[output cpu]]  [[output cuda]]             录制的运行结果（steps.py record 写的）
    [[test test_ch01_env.py · test_parse_bool]] 本章测试文件里的一个函数
    [[practice]]                                本章的练习题列表

任何页面都可以用 ``[[chapters]]``（按阶段列出全部章节）。
指令写错、文件或限定名不存在、缺录制、章号不存在，都会抛出 PluginError，写明页面和行号，构建失败；
不认识的 ``[[...]]`` 行同样报错，不会原样留在网页里。

另外：按章节清单和练习题生成导航（on_config）；为每道练习题生成一页（只用题面、起始代码和可见测试，
参考答案、隐藏测试和错误答案永远不进网站）；用 jupytext 把每章的 main.py 转成 notebook，
随网站发布在 ``notebooks/chNN.ipynb``。
"""

from __future__ import annotations

import functools
import importlib.util
import json
import posixpath
import re
import sys
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

# 单独一行的指令；(?!\[) 排除 [[[ 这类写法
_DIRECTIVE_LINE = re.compile(r"^(?P<indent>[ \t]*)\[\[(?P<body>[^\[\]]*)\]\][ \t]*$")
_ANY_DIRECTIVE = re.compile(r"\[\[[^\[\]\n]*\]\]")
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})")
_SEP = " · "
_KNOWN = ("files", "main", "excerpt", "output", "test", "practice", "chapters")
_PROBLEM_DIR = re.compile(r"(\d{3})-([a-z0-9]+(?:-[a-z0-9]+)*)")


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
    path: str = ""  # excerpt：minisgl/ 下的路径；test：章节目录里的文件名
    qualname: str = ""
    kind: str = ""  # output：cpu / cuda


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
        if rest not in ("cpu", "cuda"):
            raise DirectiveError(f"[[output ...]] 的参数只能是 cpu 或 cuda，不是 {rest!r}")
        return Directive(name, kind=rest)
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
        if not path.startswith("minisgl/"):
            raise DirectiveError(f"摘录的路径要以 minisgl/ 开头：{path!r}")
    elif "/" in path:
        raise DirectiveError(f"[[test ...]] 只写章节目录里的文件名，不是 {path!r}")
    return Directive(name, path=path, qualname=qualname)


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
        meta, body = _split_front_matter(statement.read_text(encoding="utf-8"), where)
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
                chapter=int(meta["chapter"]),
                difficulty=str(meta["difficulty"]),
                runtime=str(meta["runtime"]),
                body=body.strip("\n"),
            )
        )
    return problems


def judge_command(problem: Problem) -> str:
    return f"python practice/judge.py {problem.code} 你的文件.py"


def problem_page(problem: Problem, chapter_page: str | None, browser_editor: bool) -> str:
    """一道练习题的网页：题面 + 起始代码 + 可见测试 + 判题命令。

    只读 statement.md、starter.py 和 test_visible.py：solution.py、test_hidden.py、wrong_*.py
    不能出现在网站上（网站上的一切都能被下载）。
    """
    starter = (problem.dir / "starter.py").read_text(encoding="utf-8")
    visible_path = problem.dir / "test_visible.py"
    visible = visible_path.read_text(encoding="utf-8") if visible_path.is_file() else ""
    chapter = f"第 {problem.chapter} 章"
    if chapter_page:
        chapter = f"[{chapter}]({posixpath.relpath(chapter_page, PRACTICE_PAGES)})"
    where = "浏览器题（只用标准库）" if problem.runtime == "browser" else "本地题（需要 torch）"
    mine = f"my_{problem.code}.py"
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
        "## 起始代码",
        "",
        *_fence("python", starter, "starter.py"),
        "",
    ]
    if visible:
        lines += [
            '??? example "可见测试（test_visible.py）"',
            "",
            *_indent(_fence("python", visible, "test_visible.py"), "    "),
            "",
            "    判题时还会运行一组隐藏测试，覆盖更多边界情况。",
            "",
        ]
    lines += ["## 判题", "", _browser_line(problem, browser_editor), ""]
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


def _browser_line(problem: Problem, browser_editor: bool) -> str:
    if problem.runtime == "local":
        return "这道题需要 torch，在本地判题："
    if browser_editor:
        return "在浏览器里直接写代码、跑测试；也可以在本地用 `python practice/judge.py` 判题。"
    return "这道题只用标准库，浏览器里的编辑器和判题即将上线；现在请在本地判题："


def practice_index(problems: list[Problem], titles: dict[int, str]) -> str:
    lines = [
        "# 练习题",
        "",
        "每章配几道练习题，判题器把你的代码和题目的测试一起运行（`practice/judge.py`）。",
        "「浏览器题」只用标准库；「本地题」需要 torch，在仓库的 `.venv` 里判题。",
        "",
        "```bash",
        "python practice/judge.py --list               # 列出所有题目",
        "python practice/judge.py 001 你的文件.py       # 评测一道题",
        "```",
        "",
    ]
    for n in sorted({p.chapter for p in problems}):
        lines += [f"## 第 {n} 章 · {titles.get(n, '')}".rstrip(" ·"), ""]
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
    if chapter is None:
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
    if d.name == "output":
        header, body = _call(steps.read_recording, chapter, d.kind)
        meta = "；".join(f"{key}：{header[key]}" for key in ("设备", "模型", "torch", "日期"))
        # attr_list 的写法：放进 === 标签页（缩进）里也还是一个普通段落，不会套出 <p><p>
        return [_md_escape(meta), "{: .page-meta }", "", *_fence("text", body)]
    if d.name == "practice":
        return _practice_list(chapter, ctx)
    raise DirectiveError(f"未实现的指令 {d.name}")  # pragma: no cover - parse_directive 已拦住


def _md_escape(text: str) -> str:
    """普通文字里的 _ * ` 会被当成 markdown 标记（__init__.py 会变成粗体的 init.py）。"""
    return re.sub(r"([\\`*_])", r"\\\1", text)


def _practice_list(chapter: int, ctx: Context) -> list[str]:
    problems = [p for p in load_problems_cached() if p.chapter == chapter]
    if not problems:
        return ["本章暂时没有练习题。"]
    lines = [f"本章共 {len(problems)} 道练习题：", ""]
    for p in problems:
        kind = "浏览器题" if p.runtime == "browser" else "本地题，需要 torch"
        lines.append(f"- [{p.label}]({ctx.link(p.page)})：{kind}；本地判题 `{judge_command(p)}`")
    lines.append("")
    if any(p.runtime == "browser" for p in problems):
        if ctx.browser_editor:
            lines.append(
                "在浏览器里直接写代码、跑测试；也可以在本地用 `python practice/judge.py` 判题。"
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
    fence: str | None = None
    for i, line in enumerate(markdown.split("\n")):
        where = f"{page}:{i + 1 + offset}"
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group("fence")[0] == fence[0] and len(m.group("fence")) >= len(fence):
                fence = None
            out.append(line)
            continue
        if m:
            fence = m.group("fence")
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
    """docs/chapters/*.md 里 front matter 写了 chapter: N 的页面：章号 → 相对 docs/ 的路径。"""
    pages: dict[int, str] = {}
    for path in sorted((docs_dir / CHAPTER_PAGES).glob("*.md")):
        rel = path.relative_to(docs_dir).as_posix()
        text = path.read_text(encoding="utf-8")
        if not text.startswith("---"):
            continue
        try:
            meta, _ = _split_front_matter(text, rel)
        except DirectiveError as e:
            raise PluginError(str(e)) from None
        if "chapter" in meta:
            n = int(meta["chapter"])
            if n in pages:
                raise PluginError(f"{rel}: 第 {n} 章已经有页面 {pages[n]}")
            pages[n] = rel
    return pages


# ---------------------------------------------------------------- mkdocs 事件


@dataclass
class _BuildState:
    docs_dir: Path
    colab_base: str
    repo_git: str
    browser_editor: bool
    chapter_pages: dict[int, str]
    problems: list[Problem]


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
    known = {c.number for c in chapters}
    for n, rel in pages.items():
        if n not in known:
            raise PluginError(f"{rel}: chapter: {n}，但 chapters/ 下没有第 {n} 章")
    for p in problems:
        if p.chapter not in known:
            raise PluginError(f"practice/problems/{p.name}: chapter: {p.chapter} 不存在")
    _state = _BuildState(
        docs_dir=docs_dir,
        colab_base=str(extra.get("colab_base", "")),
        repo_git=str(extra.get("repo_git", "")),
        browser_editor=bool(extra.get("browser_editor", False)),
        chapter_pages=pages,
        problems=problems,
    )
    if not config.get("nav"):
        config["nav"] = build_nav(chapters, pages, problems)
    return config


@functools.cache
def load_problems_cached() -> list[Problem]:
    return load_problems()


def build_nav(chapters: list[Any], pages: dict[int, str], problems: list[Problem]) -> list[Any]:
    """首页；每个阶段一节，下面是有页面的章；最后是练习题（按章分组）。"""
    nav: list[Any] = [{"首页": "index.md"}]
    parts: dict[str, list[Any]] = {}
    for c in chapters:
        if c.number in pages:
            parts.setdefault(c.part, []).append({f"{c.number}. {c.title}": pages[c.number]})
    nav += [{part: items} for part, items in parts.items()]
    practice: list[Any] = [{"全部练习题": f"{PRACTICE_PAGES}/index.md"}]
    for n in sorted({p.chapter for p in problems}):
        items = [{p.label: p.page} for p in problems if p.chapter == n]
        practice.append({f"第 {n} 章": items})
    nav.append({"练习题": practice})
    return nav


def on_files(files: Any, config: Any) -> Any:
    """生成练习题页面、练习题总览和每章的 notebook。"""
    from mkdocs.structure.files import File

    steps = load_steps()
    state = _get_state()
    titles = {c.number: c.title for c in steps.load_chapters()}
    for p in state.problems:
        content = problem_page(p, state.chapter_pages.get(p.chapter), state.browser_editor)
        files.append(File.generated(config, p.page, content=content))
    index = practice_index(state.problems, titles)
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
    if "chapter" in meta:
        try:
            chapter = int(meta["chapter"])
        except (TypeError, ValueError):
            raise PluginError(f"{src}: front matter 的 chapter 应该是整数") from None
        steps = load_steps()
        try:
            c = steps.get_chapter(chapter)
        except steps.StepsError as e:
            raise PluginError(f"{src}: {e}") from None
        # 标题与所属阶段都来自 chapter.toml，页面里不写 H1
        if re.search(r"^# ", markdown, re.M):
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
    source = page.file.content_string
    body = expand_markdown(markdown, chapter, src, ctx, _front_matter_lines(source, markdown))
    return "\n".join(prefix) + body
