"""网站的测试：章节页必须符合页面模板；mkdocs 钩子的指令解析、报错和练习题页面。

页面模板（每一章都一样，顺序固定）：导语 · 自测 · 本章要写的文件 · 这一步的 main · 正文 · 运行 ·
官方实现 · 测试 · 怎么讲清楚 · 练习 · 小结 · 本章练习题。
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

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
    load_judge_core,
    load_problems,
    parse_directive,
    problem_page,
)

DOCS = REPO / "docs"
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
    if re.search(r"^# ", lead, re.M) or any(re.search(r"^# ", s.text, re.M) for s in sections):
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
    # 浏览器题：编辑器脚本只在浏览器题的页面里加载；Pyodide 只带运行时需要的 5 个文件
    config = yaml.safe_load(
        re.sub(r"!!python/\S+", "", (REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    )
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


def test_build_fails_on_a_bad_directive(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    page = docs / "chapters" / "01-skeleton.md"
    text = page.read_text(encoding="utf-8") + "\n[[excerpt minisgl/env.py · NoSuchThing]]\n"
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
    assert "NoSuchThing" in r.stdout + r.stderr
