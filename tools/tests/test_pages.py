"""网站的测试：章节页必须符合页面模板；mkdocs 钩子的指令解析、报错和练习题页面；
Markdown 源码的排版检查、中文段落的换行；整站构建与链接检查。

页面模板（每一章都一样，顺序固定）：导语 · 自测 · 本章要写的文件 · 这一步的 main · 正文 · 运行 ·
官方实现 · 测试 · 怎么讲清楚 · 练习 · 小结 · 本章练习题。
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from mkdocs.exceptions import PluginError

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import docs_hooks  # noqa: E402
import steps  # noqa: E402
from docs_hooks import (  # noqa: E402
    Context,
    Directive,
    DirectiveError,
    expand_markdown,
    fenced_lines,
    join_cjk_lines,
    layout_problems,
    load_judge_core,
    load_problems,
    parse_directive,
    problem_page,
    repo_links,
)

DOCS = REPO / "docs"
PROBLEMS = REPO / "practice" / "problems"
PINNED_COMMIT = "20fcd7f3c6a1898a61139fae1c97cc7a40bd8d66"

# (标题, 这一节里必须出现的东西)；正文小节夹在「这一步的 main」和「运行」之间，标题随意
BEFORE_BODY = ["自测", "本章要写的文件", "这一步的 main"]
AFTER_BODY = ["运行", "官方实现", "测试", "怎么讲清楚", "练习", "小结", "本章练习题"]


@pytest.fixture(autouse=True)
def fresh_steps() -> None:
    """别的测试可能改过 steps.REPO 并留下缓存：每个测试从真实仓库重新读。"""
    steps.reset_caches()


# ---------------------------------------------------------------- 页面模板检查


@dataclass
class Section:
    title: str
    line: int
    text: str = ""
    subsections: list[str] = field(default_factory=list)


def split_page(text: str) -> tuple[dict[str, object], str, list[Section]]:
    """(front matter, 导语, 各个 ## 小节)；围栏代码块里的 # 不算标题。"""
    meta: dict[str, object] = {}
    body = text
    offset = 0
    m = re.match(r"---\n(.*?\n)---\n", text, re.S)
    if m:
        meta = yaml.safe_load(m.group(1)) or {}
        body = text[m.end() :]
        offset = m.group(0).count("\n")
    lead: list[str] = []
    sections: list[Section] = []
    fence: str | None = None
    for i, line in enumerate(body.split("\n"), offset + 1):
        fm = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and fm:
            fence = fm.group(1)
        elif fence is not None and fm and line.strip().startswith(fence):
            fence = None
        elif fence is None and line.startswith("## "):
            sections.append(Section(line[3:].strip(), i))
            continue
        elif fence is None and line.startswith("### ") and sections:
            sections[-1].subsections.append(line[4:].strip())
        if sections:
            sections[-1].text += line + "\n"
        else:
            lead.append(line)
    return meta, "\n".join(lead), sections


def check_page(text: str, name: str) -> list[str]:
    """返回这一页不符合模板的地方（空列表表示没问题），每条都写明页面和小节。"""
    errors: list[str] = []
    meta, lead, sections = split_page(text)

    def err(msg: str) -> None:
        errors.append(f"{name}: {msg}")

    if not isinstance(meta.get("chapter"), int):
        err("front matter 要写 chapter: N（整数）")
    # 代码块里的 # 是注释，不是标题
    if any(not where and line.startswith("# ") for _, line, where in fenced_lines(text)):
        err("章节页不写一级标题（标题来自 chapter.toml）")
    if not re.search(r"[\u4e00-\u9fff]", lead):
        err("第一个 ## 之前要有一段导语")

    titles = [s.title for s in sections]
    missing = [t for t in BEFORE_BODY + AFTER_BODY if t not in titles]
    for t in missing:
        err(f"缺少小节「## {t}」")
    if missing:
        return errors
    positions = [titles.index(t) for t in BEFORE_BODY + AFTER_BODY]
    if positions != sorted(positions):
        order = "、".join(BEFORE_BODY + AFTER_BODY)
        err(f"小节顺序不对：应该是 {order}；现在是 {'、'.join(titles)}")
        return errors
    if positions[-1] != len(titles) - 1:
        err("「## 本章练习题」必须是最后一个小节")
    body = sections[titles.index("这一步的 main") + 1 : titles.index("运行")]
    if not body:
        err("「## 这一步的 main」和「## 运行」之间至少要有一个正文小节")
    elif not any("[[excerpt " in s.text for s in body):
        err("正文小节里至少要有一个 [[excerpt ...]]")

    def sec(title: str) -> Section:
        return sections[titles.index(title)]

    def need(title: str, pattern: str, what: str) -> None:
        if not re.search(pattern, sec(title).text, re.M):
            err(f"「## {title}」里缺少{what}")

    need("自测", r"^\d+\. ", "编号的问题")
    need("自测", r'^\?\?\?\+? note "自测参考答案"', '折叠的答案（??? note "自测参考答案"）')
    need("本章要写的文件", r"^\[\[files\]\]$", " [[files]]")
    need("这一步的 main", r"^\[\[main\]\]$", " [[main]]")
    need("运行", r"^```", "运行命令的代码块")
    if "运行结果" not in sec("运行").subsections:
        err("「## 运行」里缺少「### 运行结果」")
    need("运行", r"^\s*\[\[output cpu\]\]$", " [[output cpu]]")
    need("官方实现", PINNED_COMMIT[:7], f"固定的官方提交 {PINNED_COMMIT[:7]}")
    if "与官方的差异" not in sec("官方实现").subsections:
        err("「## 官方实现」里缺少「### 与官方的差异」")
    need("测试", r"^\s*\[\[test [^\]]+\]\]$", "至少一个 [[test 文件 · 函数]]")
    need("怎么讲清楚", r"[\u4e00-\u9fff]", "正文")
    need("练习", r"^\d+\. ", "编号的练习")
    need("练习", r'^\?\?\?\+? note "参考答案"', '折叠的参考答案（??? note "参考答案"）')
    need("小结", r"[\u4e00-\u9fff]", "正文")
    need("本章练习题", r"^\[\[practice\]\]$", " [[practice]]")
    return errors


def chapter_page_files() -> list[Path]:
    return sorted((DOCS / "chapters").glob("*.md"))


@pytest.mark.parametrize("page", chapter_page_files(), ids=lambda p: p.name)
def test_chapter_page_follows_template(page: Path) -> None:
    errors = check_page(page.read_text(encoding="utf-8"), f"docs/chapters/{page.name}")
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("page", chapter_page_files(), ids=lambda p: p.name)
def test_chapter_page_matches_its_folder(page: Path) -> None:
    meta, _, _ = split_page(page.read_text(encoding="utf-8"))
    n = meta.get("chapter")
    folders = {c.number: c.dir.name for c in steps.load_chapters()}
    assert n in folders, f"docs/chapters/{page.name}: chapter: {n}，但 chapters/ 下没有这一章"
    assert page.stem == folders[n], (
        f"docs/chapters/{page.name} 写的是第 {n} 章，文件名应该是 {folders[n]}.md"
    )


def test_every_chapter_has_a_page() -> None:
    pages = {p.stem for p in chapter_page_files()}
    missing = [c.dir.name for c in steps.load_chapters() if c.dir.name not in pages]
    assert not missing, f"这些章节还没有页面（docs/chapters/NN-slug.md）：{missing}"


def test_parts_are_contiguous_and_distinctly_named() -> None:
    """导航里每个阶段一节：同一阶段的章连在一起，阶段的名字（「 · 」之前）互不相同。"""
    parts: list[str] = []
    for c in steps.load_chapters():
        if not parts or parts[-1] != c.part:
            parts.append(c.part)
    assert len(parts) == len(set(parts)), f"同一个阶段被别的阶段隔开了：{parts}"
    names = [p.split(" · ")[0] for p in parts]
    assert len(names) == len(set(names)), f"两个阶段同名：{parts}"


def _good_page() -> str:
    return (DOCS / "chapters" / "01-skeleton.md").read_text(encoding="utf-8")


def test_template_check_accepts_the_real_page() -> None:
    assert check_page(_good_page(), "01") == []


@pytest.mark.parametrize("title", BEFORE_BODY + AFTER_BODY)
def test_template_check_rejects_a_missing_section(title: str) -> None:
    text = _good_page().replace(f"\n## {title}\n", "\n## 别的标题\n", 1)
    errors = check_page(text, "synthetic.md")
    assert f"synthetic.md: 缺少小节「## {title}」" in errors


def test_template_check_rejects_wrong_order_and_missing_parts() -> None:
    text = _good_page()
    # 交换「小结」和「练习」
    a, b = text.index("\n## 练习\n"), text.index("\n## 小结\n")
    c = text.index("\n## 本章练习题\n")
    swapped = text[:a] + text[b:c] + text[a:b] + text[c:]
    assert any("小节顺序不对" in e for e in check_page(swapped, "x.md"))
    no_answers = text.replace('??? note "自测参考答案"', "自测参考答案")
    assert any("自测参考答案" in e for e in check_page(no_answers, "x.md"))
    no_output = text.replace("[[output cpu]]", "")
    assert any("[[output cpu]]" in e for e in check_page(no_output, "x.md"))
    no_test = re.sub(r"^\[\[test .*\]\]$", "", text, flags=re.M)
    assert any("[[test" in e for e in check_page(no_test, "x.md"))
    no_diff = text.replace("### 与官方的差异", "### 其他")
    assert any("与官方的差异" in e for e in check_page(no_diff, "x.md"))


# ---------------------------------------------------------------- 指令解析


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("files", Directive("files")),
        (" main ", Directive("main")),
        ("practice", Directive("practice")),
        ("output cpu", Directive("output", kind="cpu")),
        ("output cuda", Directive("output", kind="cuda")),
        (
            "output cuda qwen3-0.6b-shape",
            Directive("output", kind="cuda", path="qwen3-0.6b-shape"),
        ),
        ("output cuda tp2", Directive("output", kind="cuda.tp2")),
        (
            "output cuda tp2 qwen3-0.6b-shape",
            Directive("output", kind="cuda.tp2", path="qwen3-0.6b-shape"),
        ),
        ("excerpt minisgl/env.py", Directive("excerpt", path="minisgl/env.py")),
        (
            "excerpt minisgl/utils/registry.py · Registry.register",
            Directive("excerpt", path="minisgl/utils/registry.py", qualname="Registry.register"),
        ),
        (
            "test test_ch01_env.py · test_bool_true_words",
            Directive("test", path="test_ch01_env.py", qualname="test_bool_true_words"),
        ),
    ],
)
def test_parse_directive(body: str, expected: Directive) -> None:
    assert parse_directive(body) == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("file", "未知的指令"),
        ("files extra", "不带参数"),
        ("output gpu", "cpu 或 cuda"),
        ("output cpu tp2", "cpu 或 cuda"),  # 没有 GPU 时多 rank 的录制就是默认的 CPU 录制
        ("excerpt", "写法"),
        ("excerpt env.py", "minisgl/"),
        ("excerpt minisgl/env.py ·", "写法"),
        ("excerpt minisgl/env.py · 1bad", "限定名"),
        ("excerpt minisgl/env.py Registry", "空格"),
        ("test chapters/01-skeleton/test_ch01_env.py · f", "文件名"),
    ],
)
def test_parse_directive_rejects(body: str, message: str) -> None:
    with pytest.raises(DirectiveError, match=message):
        parse_directive(body)


def _expand(markdown: str, chapter: int | None = 1) -> str:
    ctx = Context(colab_base="https://colab.example/base", page_src="chapters/01-skeleton.md")
    return expand_markdown(markdown, chapter, "chapters/01-skeleton.md", ctx, offset=3)


def test_expand_excerpt_with_title_and_lines() -> None:
    out = _expand("前文\n\n[[excerpt minisgl/utils/registry.py · Registry.register]]\n")
    ex = steps.excerpt(1, "utils/registry.py", "Registry.register")
    title = f"minisgl/utils/registry.py · Registry.register（第 {ex.start}～{ex.end} 行）"
    assert f'```python title="{title}"' in out
    assert ex.code.strip() in out
    assert "[[excerpt" not in out


def test_expand_whole_file_and_indentation() -> None:
    out = _expand('=== "CPU"\n\n    [[excerpt minisgl/utils/misc.py]]\n')
    assert '    ```python title="minisgl/utils/misc.py"' in out
    first_code_line = steps.slice_text("utils/misc.py", 1).split("\n")[0]
    assert f"    {first_code_line}" in out


def test_expand_files_main_output_test_practice() -> None:
    out = _expand("[[files]]\n\n[[main]]\n\n[[output cpu]]\n\n[[test test_ch01_env.py]]\n")
    assert steps.stats_line(1) in out
    assert steps.tree_text(1) in out
    assert "\\_\\_init\\_\\_.py" in out  # 文件名里的下划线不能变成粗体
    assert 'title="chapters/01-skeleton/main.py"' in out
    assert "(../notebooks/ch01.ipynb)" in out
    assert "(https://colab.example/base/notebooks/ch01.ipynb)" in out
    header, body = steps.read_recording(1, "cpu")
    assert header["torch"] in out and body.strip().split("\n")[0] in out
    assert 'title="chapters/01-skeleton/test_ch01_env.py"' in out
    practice = _expand("[[practice]]\n")
    for p in load_problems():
        if p.chapter == 1:
            assert f"[{p.label}](../practice/{p.name}.md)" in practice
            assert f"python practice/judge.py {p.code} 你的文件.py" in practice


def test_directives_inside_code_fences_are_left_alone() -> None:
    text = "```markdown\n[[excerpt minisgl/env.py · Nope]]\n[[whatever]]\n```\n"
    assert _expand(text) == text


def test_unknown_qualname_fails_with_page_and_line() -> None:
    with pytest.raises(PluginError, match=r"chapters/01-skeleton\.md:6: .*NoSuchThing"):
        _expand("a\nb\n[[excerpt minisgl/env.py · NoSuchThing]]\n")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[[excerpt minisgl/no_such_file.py]]", "no_such_file"),
        ("[[test test_nope.py · test_x]]", "test_nope.py 不存在"),
        ("[[test test_ch01_env.py · test_nope]]", "test_nope"),
        ("[[frobnicate]]", "未知的指令"),
        ("看这里 [[files]] 的输出", "单独占一行"),
    ],
)
def test_unresolved_directives_fail(line: str, message: str) -> None:
    with pytest.raises(PluginError, match=message):
        _expand(f"{line}\n")


def test_unknown_chapter_and_missing_recording_fail() -> None:
    with pytest.raises(PluginError, match="没有第 99 章"):
        _expand("[[files]]\n", chapter=99)
    with pytest.raises(PluginError, match="chapter: N"):
        _expand("[[files]]\n", chapter=None)
    c = steps.get_chapter(1)
    if not (c.dir / "output.cuda.txt").exists():
        with pytest.raises(PluginError, match="output.cuda.txt"):
            _expand("[[output cuda]]\n")


# ---------------------------------------------------------------- 练习题页面


def _secret_lines(problem_dir: Path, public: str) -> list[str]:
    """参考答案、隐藏测试、错误答案里有、而公开内容里没有的行（去掉空白后长于 12 个字符）。"""
    secret: list[str] = []
    files = [problem_dir / "solution.py", problem_dir / "test_hidden.py"]
    files += sorted(problem_dir.glob("wrong_*.py"))
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            s = line.strip()
            if len(s) > 12 and s not in public:
                secret.append(s)
    return secret


@pytest.mark.parametrize("problem", load_problems(), ids=lambda p: p.name)
def test_problem_page_has_no_solution(problem: docs_hooks.Problem) -> None:
    page = problem_page(problem, "chapters/01-skeleton.md", browser_editor=False)
    public = "\n".join(
        [
            (problem.dir / "statement.md").read_text(encoding="utf-8"),
            (problem.dir / "starter.py").read_text(encoding="utf-8"),
            (problem.dir / "test_visible.py").read_text(encoding="utf-8"),
        ]
    )
    secret = _secret_lines(problem.dir, public)
    assert secret, f"{problem.name}: 参考答案和公开内容一模一样？"
    leaked = [s for s in secret if s in page]
    assert not leaked, f"{problem.name} 的页面泄露了：{leaked[:3]}"
    assert problem.title in page
    assert (problem.dir / "starter.py").read_text(encoding="utf-8").strip() in page
    assert f"python practice/judge.py {problem.code} my_{problem.code}.py" in page


def test_browser_line_only_when_the_editor_exists() -> None:
    browser = [p for p in load_problems() if p.runtime == "browser"]
    local = [p for p in load_problems() if p.runtime == "local"]
    claim = "在浏览器里直接写代码、跑测试"
    if browser:
        assert claim not in problem_page(browser[0], None, browser_editor=False)
        assert claim in problem_page(browser[0], None, browser_editor=True)
    if local:
        page = problem_page(local[0], None, browser_editor=True)
        assert claim not in page
        assert 'class="practice"' not in page  # 需要 torch 的题只给本地判题命令


def _editor_spec(page: str) -> dict[str, object]:
    m = re.search(r'<script type="application/json" class="practice-data">(.*?)</script>', page)
    assert m, "页面里没有编辑器的数据"
    return json.loads(m.group(1))


@pytest.mark.parametrize(
    "problem", [p for p in load_problems() if p.runtime == "browser"], ids=lambda p: p.name
)
def test_editor_page_ships_tests_but_never_the_solution(problem: docs_hooks.Problem) -> None:
    page = problem_page(problem, None, browser_editor=True, version="v1")
    spec = _editor_spec(page)
    read = lambda name: (problem.dir / name).read_text(encoding="utf-8")  # noqa: E731
    # 判题要用的都在：起始代码、可见测试、隐藏测试（只是不显示），以及每个文件里的测试名
    assert spec["starter"] == read("starter.py")
    assert spec["tests"] == [
        {"name": "test_visible.py", "source": read("test_visible.py"), "hidden": False},
        {"name": "test_hidden.py", "source": read("test_hidden.py"), "hidden": True},
    ]
    assert spec["names"]["test_hidden.py"] == load_judge_core().list_tests(read("test_hidden.py"))
    assert spec["version"] == "v1" and spec["timeoutS"] == docs_hooks.BROWSER_TIMEOUT_S
    assert "隐藏测试只是不显示，并不保密" in page
    assert f"python practice/judge.py {problem.code} my_{problem.code}.py" in page
    # 参考答案和错误答案：既不在页面文字里，也不在 JSON 解码后的数据里
    public = "\n".join(
        [read("statement.md"), read("starter.py"), read("test_visible.py"), read("test_hidden.py")]
    )
    secret: list[str] = []
    for path in [problem.dir / "solution.py", *sorted(problem.dir.glob("wrong_*.py"))]:
        for line in path.read_text(encoding="utf-8").splitlines():
            s = line.strip()
            if len(s) > 12 and s not in public:
                secret.append(s)
    assert secret, f"{problem.name}: 参考答案和公开内容一模一样？"
    decoded = json.dumps(spec, ensure_ascii=False) + page
    leaked = [s for s in secret if s in decoded or json.dumps(s, ensure_ascii=False)[1:-1] in page]
    assert not leaked, f"{problem.name} 的页面泄露了：{leaked[:3]}"


def test_editor_data_cannot_break_out_of_its_script_tag(tmp_path: Path) -> None:
    d = tmp_path / "001-tricky"
    d.mkdir()
    (d / "starter.py").write_text('X = "</script><!-- & -->"\n', encoding="utf-8")
    (d / "test_visible.py").write_text("def test_a():\n    assert '</script>'\n", encoding="utf-8")
    (d / "test_hidden.py").write_text("def test_b():\n    pass\n", encoding="utf-8")
    problem = docs_hooks.Problem(1, "tricky", d, "T", 1, "简单", "browser", "正文")
    html = docs_hooks.editor_html(problem, "v1")
    assert "\n" not in html  # 一整行原始 HTML，Markdown 不会拆开它
    assert html.count("</script>") == 1 and "<!--" not in html
    assert _editor_spec(html)["starter"] == 'X = "</script><!-- & -->"\n'
    assert "&lt;/script&gt;" in html  # 没有 JavaScript 时显示的起始代码也转义了


def test_missing_npm_packages_fail_the_build_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docs_hooks, "NODE_MODULES", tmp_path / "node_modules")
    with pytest.raises(PluginError, match="npm ci"):
        docs_hooks.check_web_deps()


# ---------------------------------------------------------------- Markdown 源码的排版


def _markdown_sources() -> list[Path]:
    statements = sorted(PROBLEMS.glob("*/statement.md"))
    return statements + sorted(DOCS.rglob("*.md"))


@pytest.mark.parametrize("path", _markdown_sources(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_markdown_sources_render_as_written(path: Path) -> None:
    problems = layout_problems(path.read_text(encoding="utf-8"))
    where = path.relative_to(REPO).as_posix()
    assert not problems, "\n".join(f"{where}:{no}: {msg}" for no, msg in problems)


# (有问题的源码, 改好的源码, 报错的行号, 报错里的字)：每一种 Python-Markdown 会读错结构的写法
BAD_LAYOUT = [
    (
        "1. 父项：\n   - 子项\n   - 子项\n2. 下一项\n",
        "1. 父项：\n    - 子项\n    - 子项\n2. 下一项\n",
        2,
        "列表项缩进了 3 格",
    ),
    ("- 父项\n  1. 子项\n", "- 父项\n    1. 子项\n", 2, "列表项缩进了 2 格"),
    (
        "1. 单位：\n\n   | a | b |\n   |---|---|\n   | 1 | 2 |\n\n2. 下一项\n",
        "1. 单位：\n\n    | a | b |\n    |---|---|\n    | 1 | 2 |\n\n2. 下一项\n",
        3,
        "空行之后",
    ),
    ("1. 第一段\n\n   第二段\n", "1. 第一段\n\n    第二段\n", 3, "空行之后"),
    (
        "1. 代码：\n\n   ```text\n   x\n   ```\n",
        "1. 代码：\n\n    ```text\n    x\n    ```\n",
        3,
        "空行之后",
    ),
    ("- 父项\n        - 跳了一层\n", "- 父项\n    - 跳了一层\n", 2, "多缩进了 8 格"),
    (
        "1. 第一段\n\n    第二段\n2. 下一项\n",
        "1. 第一段\n\n    第二段\n\n2. 下一项\n",
        4,
        "列表项前面要空一行",
    ),
    (
        "1. 第一段\n\n    ```text\n    x\n    ```\n2. 下一项\n",
        "1. 第一段\n\n    ```text\n    x\n    ```\n\n2. 下一项\n",
        6,
        "列表项前面要空一行",
    ),
    ("规则如下：\n- 一\n- 二\n", "规则如下：\n\n- 一\n- 二\n", 2, "列表项前面要空一行"),
    (
        "结果如下：\n| a | b |\n|---|---|\n",
        "结果如下：\n\n| a | b |\n|---|---|\n",
        2,
        "表格前面要空一行",
    ),
]

GOOD_LAYOUT = [
    "1. 父项：\n    - 子项\n      接着写\n    - 子项\n\n    第二段\n\n"
    "    | a | b |\n    |---|---|\n\n2. 下一项\n   接着写（续行缩进几格都行）\n",
    "- 父项\n    1. 子项\n        - 孙项\n",
    "1. 代码：\n\n    ```text\n       缩进 3 格的代码行不检查\n    - 也不是列表\n    ```\n"
    "\n2. 下一项\n",
    "## 标题\n- 一\n- 二\n\n段落\n\n   缩进 3 格的普通段落（不在列表里）\n",
    '!!! note "提示"\n    - 一\n    - 二\n\n=== "CPU"\n\n    1. 一\n        - 子项\n',
]


@pytest.mark.parametrize(("bad", "fixed", "line", "message"), BAD_LAYOUT)
def test_layout_check_catches_markdown_that_would_flatten(
    bad: str, fixed: str, line: int, message: str
) -> None:
    problems = layout_problems(bad)
    assert problems and problems[0][0] == line and message in problems[0][1], problems
    assert layout_problems(fixed) == []
    # 报出来的每一种写法，渲染出来的结构确实和改好的不一样
    assert _skeleton(_render(bad)) != _skeleton(_render(fixed))


def _render(text: str) -> str:
    import markdown

    return markdown.markdown(text, extensions=["tables", "pymdownx.superfences"])


@pytest.mark.parametrize("text", GOOD_LAYOUT)
def test_layout_check_accepts_proper_nesting(text: str) -> None:
    assert layout_problems(text) == []


def _skeleton(html_text: str) -> list[str]:
    """段落、列表、表格、代码块的嵌套结构（标签的开闭序列）。"""
    keep = {"p", "ol", "ul", "li", "table", "pre"}
    out: list[str] = []

    class P(HTMLParser):
        def handle_starttag(self, tag: str, attrs: object) -> None:
            if tag in keep:
                out.append(f"<{tag}")

        def handle_endtag(self, tag: str) -> None:
            if tag in keep:
                out.append(f"{tag}>")

    P().feed(html_text)
    return out


def test_bad_statement_fails_with_file_and_line(tmp_path: Path) -> None:
    d = tmp_path / "001-bad"
    d.mkdir()
    front = "---\ntitle: T\nchapter: 1\ndifficulty: 简单\nruntime: browser\n---\n\n"
    (d / "statement.md").write_text(front + "1. 父项：\n   - 子项\n", encoding="utf-8")
    with pytest.raises(DirectiveError, match=r"001-bad/statement\.md:9: 列表项缩进了 3 格"):
        load_problems(tmp_path)


# ---------------------------------------------------------------- 中文段落里的换行


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("几千行 Python，\n却有一个服务", "几千行 Python，却有一个服务"),
        ("一章一章\n重新写出来", "一章一章重新写出来"),
        ("- 列表项的第一行，\n  第二行", "- 列表项的第一行，第二行"),
        ("1. 按下面的顺序\n   检查：", "1. 按下面的顺序检查："),
        ("先记下**原因**\n再送错误回复", "先记下**原因**再送错误回复"),
        (
            "内嵌模型校验；\n`tools/steps.py check`（逐章）",
            "内嵌模型校验；`tools/steps.py check`（逐章）",
        ),
        ("它们都一直在做 prefill\n（第 8 章）", "它们都一直在做 prefill（第 8 章）"),
        # 中文和英文单词、数字、代码之间的空格留着
        ("每个 rank\n都不一样", "每个 rank\n都不一样"),
        ("分给 `tp_size` 个\nrank", "分给 `tp_size` 个\nrank"),
        # 新的块、硬换行、标题、表格、代码块都不动
        ("规则如下：\n\n- 一", "规则如下：\n\n- 一"),
        ("硬换行  \n下一行", "硬换行  \n下一行"),
        ("## 标题\n正文", "## 标题\n正文"),
        ("| 中 | 文 |\n正文", "| 中 | 文 |\n正文"),
        ("```text\n中文\n中文\n```\n", "```text\n中文\n中文\n```\n"),
        (
            "    ```text\n    中文，\n    （续）\n    ```",
            "    ```text\n    中文，\n    （续）\n    ```",
        ),
        ('!!! note "提示"\n    中文', '!!! note "提示"\n    中文'),
        ("<p>中文</p>\n（续）", "<p>中文</p>\n（续）"),
        ("正文：\n1. 一", "正文：\n1. 一"),
    ],
)
def test_join_cjk_lines(source: str, expected: str) -> None:
    assert join_cjk_lines(source) == expected


# ---------------------------------------------------------------- 仓库地址


def test_repo_links_are_empty_without_a_repo_url() -> None:
    assert repo_links({}) == docs_hooks.RepoLinks()
    assert repo_links({"repo_url": ""}) == docs_hooks.RepoLinks()


def test_repo_links_come_from_repo_url() -> None:
    links = repo_links({"repo_url": "https://github.com/someone/minisgl-book/"}, "gh-pages")
    assert links.colab_base == (
        "https://colab.research.google.com/github/someone/minisgl-book/blob/gh-pages"
    )
    assert links.repo_git == "https://github.com/someone/minisgl-book.git"
    assert links.edit_base == "https://github.com/someone/minisgl-book/edit/main"
    other = repo_links({"repo_url": "https://github.com/a/b", "repo_branch": "dev"})
    assert other.edit_base == "https://github.com/a/b/edit/dev"


@pytest.mark.parametrize(
    "url", ["https://github.com/OWNER", "https://github.com/a/b.git", "https://gitlab.com/a/b"]
)
def test_repo_links_reject_other_urls(url: str) -> None:
    with pytest.raises(DirectiveError, match="https://github.com/OWNER/REPO"):
        repo_links({"repo_url": url})


def test_repo_links_reject_the_old_settings() -> None:
    with pytest.raises(DirectiveError, match="extra.repo_url"):
        repo_links({"colab_base": "https://colab.research.google.com/github/OWNER/REPO"})


def test_notebook_clones_the_repo_only_when_it_is_set() -> None:
    assert "git clone" not in docs_hooks.main_to_notebook(1, "")
    nb = docs_hooks.main_to_notebook(1, "https://github.com/a/b.git")
    assert "https://github.com/a/b.git" in nb and '\\"clone\\"' in nb


def test_no_colab_link_without_a_repo() -> None:
    ctx = Context(page_src="chapters/01-skeleton.md")
    out = expand_markdown("[[main]]\n", 1, "chapters/01-skeleton.md", ctx)
    assert "下载 notebook" in out and "Colab" not in out


# ---------------------------------------------------------------- 链接检查


class _PageLinks(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(str(a[key]))
        if tag in ("a", "link", "script", "img", "iframe", "source"):
            self.links += [str(a[k]) for k in ("href", "src") if a.get(k) is not None]


def check_links(site: Path, allowed_external: tuple[str, ...]) -> list[str]:
    """网站里每一个 href/src：站内的页面和文件要存在，#锚点要在目标页上；站外的只能是允许的前缀。

    只有 404.html 可以用绝对路径（它在任何路径下都可能被显示，mkdocs 因此这样生成它）。
    """
    parsed: dict[Path, _PageLinks] = {}

    def parse(path: Path) -> _PageLinks:
        if path not in parsed:
            parsed[path] = _PageLinks()
            parsed[path].feed(path.read_text(encoding="utf-8"))
        return parsed[path]

    errors: list[str] = []
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site).as_posix()
        for url in parse(page).links:
            parts = urlsplit(url)
            if parts.scheme in ("mailto", "javascript", "data"):
                continue
            if parts.scheme or url.startswith("//"):
                if not url.startswith(allowed_external):
                    errors.append(f"{rel}: 站外链接 {url} 不在允许的列表里")
                continue
            target = page
            if parts.path:
                base = posixpath.dirname(rel)
                if parts.path.startswith("/"):
                    if rel != "404.html":
                        errors.append(f"{rel}: {url} 是绝对路径，网站不在域名根目录时会失效")
                        continue
                    base = ""
                path = posixpath.normpath(posixpath.join(base, unquote(parts.path).lstrip("/")))
                if path.startswith(".."):
                    errors.append(f"{rel}: {url} 指到了网站外面")
                    continue
                target = site / path
                if target.is_dir():
                    target = target / "index.html"
            if not target.is_file():
                errors.append(f"{rel}: {url} 指向的 {target.relative_to(site)} 不存在")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in parse(target).ids:
                    errors.append(f"{rel}: {url} 的锚点 #{parts.fragment} 在目标页上不存在")
    return errors


# 页面正文里引用的站外地址（前缀）；指向本书仓库的链接另由 extra.repo_url 生成
EXTERNAL_REFERENCES = (
    "https://github.com/sgl-project/mini-sglang",  # 官方实现
    "http://127.0.0.1:8000/",  # 本地预览网站
    "https://schemathesis.readthedocs.io/",
    "https://pypi.org/project/setproctitle/",
)


def allowed_external(extra: dict[str, object]) -> tuple[str, ...]:
    links = repo_links(extra)
    repo = links.repo_git.removesuffix(".git")
    return EXTERNAL_REFERENCES + tuple(u for u in (links.colab_base, repo) if u)


def test_link_check_catches_broken_links(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="x">x</h2>', encoding="utf-8")
    (tmp_path / "index.html").write_text(
        '<a href="a/">ok</a> <a href="a/#x">ok</a> <a href="#top">bad</a>'
        '<a href="b/">missing</a> <a href="a/#y">bad anchor</a>'
        '<a href="https://example.com/">external</a> <a href="/a/">absolute</a>'
        '<img src="../x.png"> <a href="https://github.com/sgl-project/mini-sglang/x">ok</a>',
        encoding="utf-8",
    )
    errors = check_links(tmp_path, EXTERNAL_REFERENCES)
    assert len(errors) == 6, errors
    for what in ("#top", "b/", "#y", "https://example.com/", "/a/", "../x.png"):
        assert any(what in e for e in errors), what


# ---------------------------------------------------------------- 整站构建


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(config)]
        + ["-d", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_site_builds_strict_without_external_requests(tmp_path: Path) -> None:
    site = tmp_path / "site"
    r = _mkdocs(REPO / "mkdocs.yml", site)
    assert r.returncode == 0, r.stdout + r.stderr
    for c in steps.load_chapters():
        assert (site / "notebooks" / f"ch{c.number:02d}.ipynb").is_file()
    for p in load_problems():
        html = (site / "practice" / p.name / "index.html").read_text(encoding="utf-8")
        assert p.title in html
    # 网站不加载任何外部的脚本、样式或字体
    external = re.compile(
        r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.IGNORECASE
    )
    for page in site.rglob("*.html"):
        hit = external.search(page.read_text(encoding="utf-8"))
        assert hit is None, f"{page.relative_to(site)} 有外部请求：{hit.group(0) if hit else ''}"
    # 网站里没有任何参考答案文件
    assert not list(site.rglob("solution.py")) and not list(site.rglob("wrong_*.py"))
    config = yaml.safe_load(
        re.sub(r"!!python/\S+", "", (REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    )
    # 站内链接和锚点都在；站外链接只有正文引用的那几个和由 extra.repo_url 生成的
    errors = check_links(site, allowed_external(config["extra"]))
    assert not errors, "\n".join(errors[:20])
    # 行内代码里的标识符搜得到：按搜索的分词，第 15 章里的 ZmqPubQueue 是一个完整的词
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    separator = re.compile(index["config"]["separator"])
    words = {
        word.lower()
        for doc in index["docs"]
        if doc["location"].startswith("chapters/15-")
        for word in separator.split(re.sub(r"<[^>]+>", " ", doc["text"]))
    }
    assert {"zmqpubqueue", "start_background_server"} <= words
    # 录制的运行结果里没有 markdown 的表格和粗体
    bench = (site / "chapters" / "19-bench" / "index.html").read_text(encoding="utf-8")
    outputs = re.findall(r'class="language-text[^"]*"><pre\b.*?</pre>', bench, re.S)
    assert outputs
    for pre in outputs:
        assert "|---" not in pre and not re.search(r"\*\*[^*\s][^*\n]*\*\*", pre)
    # 中文段落里没有换行（浏览器会把它显示成空格）
    breaks = cjk_soft_breaks(site)
    assert not breaks, "\n".join(breaks[:20])
    # 没设仓库地址时，没有指向它的链接，notebook 里也不克隆它
    if not config["extra"].get("repo_url"):
        for page in [*site.rglob("*.html"), *site.rglob("*.ipynb")]:
            text = page.read_text(encoding="utf-8")
            for bad in ("colab.research.google.com", "OWNER/REPO", "git clone", 'rel="edit"'):
                assert bad not in text, f"{page.relative_to(site)} 里有 {bad}"
    # 浏览器题：编辑器脚本只在浏览器题的页面里加载；Pyodide 只带运行时需要的 5 个文件
    if config["extra"].get("browser_editor"):
        assets = site / docs_hooks.PRACTICE_ASSETS
        runtime = sorted(p.name for p in (assets / "pyodide").iterdir())
        assert runtime == sorted(docs_hooks.PYODIDE_RUNTIME)
        for name in ("practice.js", "worker.mjs", "judge_core.py"):
            assert (assets / name).is_file(), name
        for p in load_problems():
            html = (site / "practice" / p.name / "index.html").read_text(encoding="utf-8")
            assert ("assets/practice/practice.js" in html) == (p.runtime == "browser"), p.name
        assert "practice.js" not in (site / "index.html").read_text(encoding="utf-8")


def cjk_soft_breaks(site: Path) -> list[str]:
    """网页正文里两边都是中文的换行（代码块、脚本和编辑器里的不算）。"""
    cjk = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"
    pattern = re.compile(rf"[{cjk}]\n\s*[{cjk}]")
    found: list[str] = []
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"<(pre|script|style|textarea)\b.*?</\1>", "", text, flags=re.S)
        text = re.sub(r"</?(?:a|strong|em|b|i|code|span|sup|sub)\b[^>]*>", "", text)  # 行内的标记
        text = re.sub(r"<[^>]+>", "\0", text)  # 块和块之间
        found += [f"{page.relative_to(site)}: {m.group(0)!r}" for m in pattern.finditer(text)]
    return found


def test_repo_url_adds_edit_and_colab_links(tmp_path: Path) -> None:
    """设了 extra.repo_url：每页有「编辑此页」、每章有「在 Colab 中打开」、notebook 克隆仓库。"""
    repo = "https://github.com/someone/minisgl-book"
    cfg = tmp_path / "mkdocs.yml"
    overrides = {
        "INHERIT": str(REPO / "mkdocs.yml"),
        "docs_dir": str(DOCS),
        "hooks": [str(REPO / "tools" / "docs_hooks.py")],
        "watch": [],
        "extra": {"repo_url": repo, "browser_editor": False},
    }
    cfg.write_text(yaml.safe_dump(overrides, allow_unicode=True), encoding="utf-8")
    site = tmp_path / "site"
    r = _mkdocs(cfg, site)
    assert r.returncode == 0, r.stdout + r.stderr
    chapter = (site / "chapters" / "01-skeleton" / "index.html").read_text(encoding="utf-8")
    assert f'href="{repo}/edit/main/docs/chapters/01-skeleton.md"' in chapter
    colab = "https://colab.research.google.com/github/someone/minisgl-book/blob/gh-pages"
    assert f'href="{colab}/notebooks/ch01.ipynb"' in chapter
    p = load_problems()[0]
    problem = (site / "practice" / p.name / "index.html").read_text(encoding="utf-8")
    assert f'href="{repo}/edit/main/practice/problems/{p.name}/statement.md"' in problem
    assert 'rel="edit"' not in (site / "practice" / "index.html").read_text(encoding="utf-8")
    notebook = (site / "notebooks" / "ch01.ipynb").read_text(encoding="utf-8")
    assert f"{repo}.git" in notebook and "git" in notebook
    errors = check_links(site, allowed_external({"repo_url": repo}))
    assert not errors, "\n".join(errors[:20])


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        ("[[excerpt minisgl/env.py · NoSuchThing]]", "NoSuchThing"),
        # 嵌套列表只缩进了 3 格：Python-Markdown 会把它读成上一层的同级项
        ("1. 父项：\n   - 子项", "列表项缩进了 3 格"),
    ],
    ids=["directive", "indentation"],
)
def test_build_fails_on_a_bad_page(tmp_path: Path, tail: str, message: str) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    page = docs / "chapters" / "01-skeleton.md"
    text = page.read_text(encoding="utf-8") + f"\n{tail}\n"
    page.write_text(text, encoding="utf-8")
    line = text.count("\n")
    config = yaml.safe_load(
        re.sub(r"!!python/\S+", "", (REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    )
    config["docs_dir"] = str(docs)
    config["hooks"] = [str(REPO / "tools" / "docs_hooks.py")]
    config.pop("watch", None)
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "toc" in ext:
            ext["toc"].pop("slugify", None)
    cfg = tmp_path / "mkdocs.yml"
    cfg.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    r = _mkdocs(cfg, tmp_path / "site")
    assert r.returncode != 0
    assert f"chapters/01-skeleton.md:{line}" in r.stdout + r.stderr
    assert message in r.stdout + r.stderr


# ---------------------------------------------------------------- 版面、搜索、录制、基准测试的图


def _css() -> str:
    return (DOCS / "stylesheets" / "extra.css").read_text(encoding="utf-8")


def _css_value(css: str, selector: str, prop: str) -> float:
    """selector { ... prop: 数字单位; } 里的数字（找不到就让测试失败）。"""
    block = re.search(re.escape(selector) + r"\s*\{([^}]*)\}", css)
    assert block, f"extra.css 里没有 {selector}"
    m = re.search(rf"(?:^|[;\s]){re.escape(prop)}:\s*([\d.]+)", block.group(1))
    assert m, f"{selector} 里没有 {prop}"
    return float(m.group(1))


def test_a_100_column_code_line_fits_at_1280_px() -> None:
    """1280 px 宽的窗口（两侧边栏都在）里，100 列的代码行不用横向滚动。

    按 mkdocs-material 的尺寸算：根字号 20 px，正文 16 px，等宽字一列 0.602 em（DejaVu Sans
    Mono；中文一个字 1 em，不到两列宽）；窗口留出 15 px 的滚动条。
    """
    css = _css()
    wide = css[css.index("@media screen and (min-width: 76.25em)") :]
    rem, body_px, scrollbar = 20, 16, 15
    grid = min(1280 - scrollbar, _css_value(css, ".md-grid", "max-width") * rem)
    sidebar = _css_value(wide, ".md-sidebar", "width") * rem
    margin = _css_value(wide, ".md-content__inner", "margin-left") * rem
    column = grid - 2 * sidebar - 2 * margin
    code_px = _css_value(wide, ".md-typeset pre > code", "font-size") * body_px
    padding = _css_value(wide, ".md-typeset pre > code", "padding-left") * code_px
    assert code_px >= 11.5, "代码字号太小"
    assert 100 * 0.602 * code_px + 2 * padding <= column


def test_inline_code_in_tables_does_not_break_inside_words() -> None:
    block = re.search(r"\.md-typeset table:not\(\[class\]\) code\s*\{([^}]*)\}", _css())
    assert block and "white-space: nowrap" in block.group(1)


def _search_config() -> tuple[dict[str, object], list[str]]:
    text = re.sub(r"!!python/\S+", "", (REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    config = yaml.safe_load(text)
    search = next(p["search"] for p in config["plugins"] if isinstance(p, dict) and "search" in p)
    return search, config["theme"]["features"]


def test_search_keeps_identifiers_whole_and_highlights() -> None:
    search, features = _search_config()
    assert "search.highlight" in features
    assert "stemmer" not in search.get("pipeline", ["stemmer"])  # 词干提取会截短标识符
    separator = re.compile(str(search["separator"]))
    text = "官方的 ZmqPubQueue（utils/mp.py 第 105～126 行）；wait_for_subscribers(n)、AbortMsg。"
    tokens = [t for t in separator.split(text) if t]
    for word in ("ZmqPubQueue", "mp.py", "wait_for_subscribers", "AbortMsg", "官方的"):
        assert word in tokens, tokens


def test_recorded_outputs_show_as_plain_text() -> None:
    """录制里程序打印的 markdown（第 19 章的结果表）在页面上显示成对齐的纯文字。"""
    for c in steps.load_chapters():
        for kind in ("cpu", "cuda"):
            if not steps.recording_path(c, kind).is_file():
                continue
            _, body = steps.read_recording(c.number, kind)
            shown = docs_hooks.plain_output(body)
            assert not re.search(r"^\|.*\|$", shown, re.M), f"第 {c.number} 章 {kind}：表格"
            assert not re.search(r"\*\*[^*\s][^*\n]*\*\*", shown), f"第 {c.number} 章 {kind}：粗体"
            if "|---" not in body:
                assert shown == body  # 没有 markdown 的录制原样显示
    out = _expand("[[output cpu]]\n", chapter=19)
    assert "|---" not in out and "**离线**" not in out and "离线：" in out
    table = docs_hooks.plain_output("| | 甲 | b |\n|---|---|---|\n| 中文 | 1 | 22 |\n")
    assert table.splitlines() == ["      甲   b", "----  --  --", "中文   1  22"]


def test_bench_plot_is_chinese_readable_and_follows_the_color_scheme() -> None:
    from minisgl.benchmark.report import load_results, render_plots

    svg = render_plots(load_results(REPO / "chapters" / "19-bench" / "results.h200.json"))
    texts = re.findall(r"<text\b([^>]*)>([^<]*)</text>", svg)
    assert any(re.search(r"[\u4e00-\u9fff]", t) for _, t in texts), "图里没有中文标签"
    # 网页正文栏约 740 px，图不比它宽就按原尺寸显示；SVG 的 1 个单位是 1 pt = 4/3 px
    width_pt = float(re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"', svg).group(1))
    scale = min(1.0, 740 / (width_pt * 4 / 3))
    sizes = [float(s) for s in re.findall(r"font-size: ([\d.]+)px", svg)]
    assert sizes and min(sizes) * 4 / 3 * scale >= 12, sorted(set(sizes))
    # 背景透明、黑色都写成 currentColor：浅色、深色模式下都看得清
    assert "#000000" not in svg and "#ffffff" not in svg.lower() and "white" not in svg
    assert '<svg fill="currentColor"' in svg
