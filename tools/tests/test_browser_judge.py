"""浏览器练习题的端到端测试：构建网站、在本机起一个 http 服务、用无头 Chromium 打开题目页。

在页面里依次运行：参考答案（全部通过）、一个错误答案（挂掉的测试名和本地判题一致）、
死循环（超时）、再运行参考答案（换了新的 Worker，照常通过，上一次运行留下的状态也不在了）。
另外检查编辑器的 4 空格缩进、「重置代码」、只能本地判题的题目页、从磁盘直接打开时的提示，
以及页面没有向 127.0.0.1 以外发出任何请求；最后是网站本身：搜索（结果落在命中的小节并高亮）、
嵌套列表的题面、1280 px 下 100 列的代码不用横向滚动。

用的是 Debian 的 chromium（make test 的准备步骤用 apt-get 安装），不用 playwright 自己下载的浏览器。
截图和计时写在 .cache/artifacts/ 下。没有 chromium、playwright 或 node_modules 时：
本地跳过并说明原因，CI（CI=true）里直接失败。
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "practice"))
import judge  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / ".cache" / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TEST_TIMEOUT_S = 5  # 测试里把页面的时限从 10 秒调到 5 秒，少等一会儿；超时的机制是同一套
RUN_WAIT_MS = 90_000  # 等一次运行（含加载 Pyodide）最多多久：2 核的 CI 机器上也绰绰有余
# 其余每一次等待（页面加载、选择器、条件）最多多久。playwright 默认 30 s：2 核的机器同时跑着
# 别的测试、别的页面的 Pyodide 时，现建的搜索索引就可能超过它
WAIT_MS = 120_000
INFINITE_LOOP = "while True:\n    pass\n"
# 写进 os.environ 的标记：如果解释器被下一次运行复用，下一次就能看到它
LEAK_SET = '\nimport os\nos.environ["MINISGL_PRACTICE_LEAK"] = "1"\n'
LEAK_CHECK = (
    '\nimport os\nassert "MINISGL_PRACTICE_LEAK" not in os.environ, "上一次运行的状态漏过来了"\n'
)


def _missing_requirement() -> str:
    if not CHROMIUM.is_file():
        return f"没有 {CHROMIUM}（Debian 的 chromium；make test 会用 apt-get 安装）"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "没有 Python 包 playwright（pip install -e '.[dev]'）"
    if not judge.PYODIDE_PACKAGE.is_file():
        return "没有 node_modules/pyodide（在仓库根目录运行 npm ci）"
    return ""


def _require(what: str, missing: str) -> None:
    """缺东西时：本地跳过并说明原因，CI 里直接失败。"""
    if not missing:
        return
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"CI 里{what}必须运行，但{missing}")
    pytest.skip(f"跳过{what}：{missing}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """用仓库的 mkdocs.yml 构建一份新的网站（约 1 秒），不依赖别的步骤留下的 .cache/site。"""
    _require("浏览器测试", _missing_requirement())
    out = tmp_path_factory.mktemp("browser") / "site"
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "assets" / "practice" / "pyodide" / "pyodide.asm.wasm").is_file()
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    # 不依赖系统的 mime 表：wasm 必须是 application/wasm，否则 Pyodide 直接失败
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".wasm": "application/wasm",
        ".mjs": "text/javascript",
        ".js": "text/javascript",
    }

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # 关掉页面时，预先启动的 Worker 可能正在下载运行时：连接被浏览器断开是正常的
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser(server: str) -> Iterator[Any]:
    """Debian chromium + 一个新建的用户目录；拦下所有不是发往 127.0.0.1 的请求并记下来。"""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="minisgl-chromium-")
    pw = sync_playwright().start()
    ctx = pw.chromium.launch_persistent_context(
        profile,
        executable_path=str(CHROMIUM),
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1100, "height": 900},
    )
    ctx.set_default_timeout(WAIT_MS)
    external: list[str] = []

    def guard(route: Any) -> None:
        url = route.request.url
        if url.startswith(("http://127.0.0.1:", "file://", "data:", "blob:")):
            route.continue_()
        else:
            external.append(url)
            route.abort()

    ctx.route("**/*", guard)
    ctx.external_requests = external  # type: ignore[attr-defined]
    try:
        yield ctx
    finally:
        ctx.close()
        pw.stop()
        shutil.rmtree(profile, ignore_errors=True)


def _browser_problems() -> list[judge.Problem]:
    """能读出来的浏览器题（目录不合规的题由 judge.py --self-check 报告，这里不让收集阶段出错）。"""
    found = []
    for d in judge.problem_dirs(judge.PROBLEMS_DIR):
        try:
            problem = judge.load_problem(d)
        except judge.ProblemError:
            continue
        if problem.runtime == "browser":
            found.append(problem)
    return found


def _browser_problem() -> judge.Problem:
    problems = [p for p in _browser_problems() if p.wrong_answers()]
    assert problems, "没有带错误答案的浏览器题"
    return problems[0]


def _run(page: Any, code: str) -> dict[str, Any]:
    """把代码放进编辑器，点「运行测试」，等这一次的结果。"""
    page.evaluate(
        "code => { const p = window.__practice[0]; p.lastResult = null; p.setCode(code); }", code
    )
    page.click(".practice-run")
    page.wait_for_function("() => window.__practice[0].lastResult !== null", timeout=RUN_WAIT_MS)
    result = page.evaluate("() => window.__practice[0].lastResult")
    items = page.eval_on_selector_all(
        ".practice-results li",
        """items => items.map(li => ({
            id: li.dataset.test, ok: li.dataset.ok === "true", hidden: li.dataset.hidden === "true",
            msg: (li.querySelector(".practice-msg") || {}).textContent || "",
        }))""",
    )
    result["items"] = items
    result["statusText"] = page.text_content(".practice-status")
    return result


def test_problem_page_grades_in_the_browser(browser: Any, server: str) -> None:
    problem = _browser_problem()
    solution = (problem.dir / "solution.py").read_text(encoding="utf-8")
    starter = (problem.dir / "starter.py").read_text(encoding="utf-8")
    wrong_path = problem.wrong_answers()[0]
    wrong = wrong_path.read_text(encoding="utf-8")
    # 本地判题（CPython 子进程）给出的失败测试名，就是页面上应该挂掉的那些
    local = judge.grade_source(wrong, problem.tests())
    expected_failed = sorted(o.id for o in local.outcomes if not o.passed)
    hidden_ids = {o.id for o in local.outcomes if o.hidden}
    assert expected_failed, f"{wrong_path.name} 在本地没有挂任何测试"

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    t0 = time.perf_counter()
    page.goto(f"{server}practice/{problem.name}/")
    page.wait_for_selector(".practice .cm-editor")
    assert page.evaluate("() => window.__practice.length") == 1
    assert page.evaluate("() => window.__practice[0].getCode()") == starter
    page.evaluate(f"() => {{ window.__practice[0].spec.timeoutS = {TEST_TIMEOUT_S}; }}")
    # 截图时不让固定在顶部的标题栏挡住编辑器
    page.add_style_tag(content=".md-header { position: static !important; }")

    # 1. 参考答案：全部通过（同时确认没有上一次运行漏过来的状态）
    ok = _run(page, solution + LEAK_CHECK)
    first_ready_s = time.perf_counter() - t0
    assert ok["status"] == "ok", ok
    assert ok["items"] and all(i["ok"] for i in ok["items"])
    n_tests = len(local.outcomes)
    assert len(ok["items"]) == n_tests
    assert f"{n_tests} passed, 0 failed" in ok["statusText"]

    # 2. 错误答案：挂掉的测试名与本地判题一致；可见测试有信息，隐藏测试只有名字
    bad = _run(page, wrong + LEAK_SET)
    assert bad["status"] == "fail", bad
    assert sorted(i["id"] for i in bad["items"] if not i["ok"]) == expected_failed
    for item in bad["items"]:
        assert item["hidden"] == (item["id"] in hidden_ids)
        if item["hidden"]:
            assert item["msg"] == "", f"隐藏测试的信息不该显示：{item}"
        elif not item["ok"]:
            assert item["msg"], f"可见测试失败时应该显示断言信息：{item}"
    page.locator(".practice").screenshot(path=str(ARTIFACTS / "browser-judge-fail.png"))

    # 3. 死循环：超时，所有测试记为失败
    t = time.perf_counter()
    loop = _run(page, INFINITE_LOOP)
    loop_s = time.perf_counter() - t
    assert loop["status"] == "timeout", loop
    assert len(loop["items"]) == n_tests and not any(i["ok"] for i in loop["items"])
    assert "超时" in loop["statusText"]

    # 4. 超时之后换了新的 Worker：参考答案照常通过，第 2 步写进 os.environ 的标记也不在了
    again = _run(page, solution + LEAK_CHECK)
    assert again["status"] == "ok", again
    assert all(i["ok"] for i in again["items"]) and len(again["items"]) == n_tests
    page.locator(".practice").screenshot(path=str(ARTIFACTS / "browser-judge-pass.png"))
    page.screenshot(path=str(ARTIFACTS / "browser-judge-page.png"), full_page=True)

    # 5. 编辑器：回车后自动缩进 4 个空格；「重置代码」恢复起始代码
    page.evaluate("() => window.__practice[0].setCode('')")
    page.click(".practice .cm-content")
    page.keyboard.type("def f():")
    page.keyboard.press("Enter")
    page.keyboard.type("return 1")
    assert page.evaluate("() => window.__practice[0].getCode()") == "def f():\n    return 1"
    page.click(".practice-reset")
    assert page.evaluate("() => window.__practice[0].getCode()") == starter

    loads = page.evaluate("() => window.__practice[0].runner.loads")
    assert not errors, errors
    assert browser.external_requests == [], browser.external_requests
    timings = {
        "problem": problem.name,
        "first_run_total_s": round(first_ready_s, 2),
        "pyodide_load_s": [round(ms / 1000, 2) for ms in loads],
        "grade_ms": {
            "solution": round(ok["gradeMs"]),
            wrong_path.name: round(bad["gradeMs"]),
            "solution_after_timeout": round(again["gradeMs"]),
        },
        "timeout_run_s": round(loop_s, 2),
        "timeout_limit_s": TEST_TIMEOUT_S,
    }
    (ARTIFACTS / "browser-judge-timings.json").write_text(
        json.dumps(timings, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    print("浏览器判题计时：", json.dumps(timings, ensure_ascii=False))
    page.close()


@pytest.mark.parametrize("problem", _browser_problems(), ids=lambda p: p.name)
def test_every_browser_problem_page_grades_its_reference(
    browser: Any, server: str, problem: judge.Problem
) -> None:
    """每一道浏览器题的页面：编辑器里是起始代码，参考答案在页面里全部通过。"""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}practice/{problem.name}/")
    page.wait_for_selector(".practice .cm-editor")
    starter = (problem.dir / "starter.py").read_text(encoding="utf-8")
    assert page.evaluate("() => window.__practice[0].getCode()") == starter
    result = _run(page, (problem.dir / "solution.py").read_text(encoding="utf-8"))
    n_tests = sum(len(judge.judge_core.list_tests(t.source)) for t in problem.tests())
    assert result["status"] == "ok", result
    assert len(result["items"]) == n_tests and all(i["ok"] for i in result["items"])
    assert not errors, errors
    assert browser.external_requests == [], browser.external_requests
    page.close()


def test_runtime_is_prepared_before_the_first_run(browser: Any, server: str) -> None:
    """页面一打开，Python 就在后台加载：不点、不聚焦，等一会儿就有一个就绪的 Worker；
    之后第一次运行不再从头加载（不多出第二个 Worker），等待时状态栏给出已等的秒数。"""
    problem = _browser_problem()
    page = browser.new_page()
    page.goto(f"{server}practice/{problem.name}/")
    page.wait_for_selector(".practice .cm-editor")
    page.wait_for_function("() => window.__practice[0].runner.loads.length === 1", timeout=180_000)
    solution = (problem.dir / "solution.py").read_text(encoding="utf-8")
    statuses: list[str] = []
    page.expose_function("__status", lambda text: statuses.append(text))
    page.evaluate(
        """() => {
            const box = window.__practice[0].status;
            // 每一次改写都记下来（回调运行时文字可能已经又变了，所以从记录里取新加的文字）
            new MutationObserver((records) => records.forEach((r) =>
                r.addedNodes.forEach((n) => window.__status(n.textContent)))).observe(
                box, { childList: true });
        }"""
    )
    result = _run(page, solution)
    assert result["status"] == "ok", result
    # 运行用的是预先加载好的那个；运行结束后在后台准备下一个
    page.wait_for_function("() => window.__practice[0].runner.loads.length === 2", timeout=180_000)
    assert any(s.startswith("正在准备 Python 运行时……已等 ") for s in statuses), statuses
    page.close()


def test_local_problem_page_has_no_editor(browser: Any, server: str) -> None:
    local = []
    for d in judge.problem_dirs(judge.PROBLEMS_DIR):
        try:
            problem = judge.load_problem(d)
        except judge.ProblemError:
            continue
        if problem.runtime == "local":
            local.append(problem)
    if not local:
        pytest.skip("还没有只能本地判题的题目")
    page = browser.new_page()
    page.goto(f"{server}practice/{local[0].name}/")
    assert page.query_selector(".practice") is None
    assert f"python practice/judge.py {local[0].number:03d}" in page.text_content("article")
    page.close()


def test_page_opened_from_disk_explains_how_to_serve(browser: Any, site: Path) -> None:
    problem = _browser_problem()
    page = browser.new_page()
    page.goto((site / "practice" / problem.name / "index.html").as_uri())
    page.wait_for_selector(".practice .cm-editor")
    assert page.is_disabled(".practice-run")
    assert page.get_attribute(".practice-status", "data-status") == "unavailable"
    assert "http.server" in page.text_content(".practice-error")
    page.close()


def test_search_opens_the_matching_section_highlighted(browser: Any, server: str) -> None:
    """行内代码里的标识符搜得到（第 15 章只在行内代码里提到 ZmqPubQueue）；点开任何一条结果，
    包括每一页打头的那一条，都落在命中的小节、搜的词被高亮。"""
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})  # 1220 px 以下搜索框收成一个图标
    page.goto(f"{server}chapters/12-message/")
    page.fill("input.md-search__input", "ZmqPubQueue")
    page.wait_for_selector(".md-search-result__item")
    links: list[str] = page.eval_on_selector_all(
        "a.md-search-result__link", "els => els.map((a) => a.href)"
    )
    assert any("/chapters/15-server/" in href for href in links), links
    for href in links:
        assert "h=zmqpubqueue#" in href, href
    page.click(".md-search-result__item >> nth=0")
    page.wait_for_selector("mark[data-md-highlight]")
    page.wait_for_function("() => window.scrollY > 0")  # 滚到了命中的小节
    page.close()


def test_statement_with_a_nested_list_renders_as_written(browser: Any, server: str) -> None:
    """051 的题面：六个方法是一个 6 项的有序列表，deliver 的三种情况是它第 2 项里的子列表。"""
    page = browser.new_page()
    page.goto(f"{server}practice/051-backend-failure/")
    shape = page.evaluate(
        """() => {
            const ol = [...document.querySelectorAll('.md-typeset ol')]
                .find((el) => el.textContent.includes('submit(uid, stream)'));
            const items = [...ol.children].filter((el) => el.tagName === 'LI');
            return items.map((li) => li.querySelectorAll(':scope > ul > li').length);
        }"""
    )
    assert shape == [0, 3, 0, 0, 0, 0], shape
    page.close()


def test_code_up_to_100_columns_shows_whole_at_1280_px(browser: Any, server: str) -> None:
    """第 15 章的代码块（最长 100 列，中文算两列）在 1280 px 的窗口里不用横向滚动。"""
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{server}chapters/15-server/")
    blocks = page.evaluate(
        """() => [...document.querySelectorAll('.md-content pre > code')].map((code) => ({
            width: Math.max(...code.textContent.split('\\n').map((line) =>
                [...line].reduce((n, ch) => n + (ch.codePointAt(0) > 0x2e80 ? 2 : 1), 0))),
            scroll: code.scrollWidth,
            client: code.clientWidth,
            visible: code.offsetParent !== null,
        }))"""
    )
    checked = [b for b in blocks if b["visible"] and b["width"] <= 100]
    assert len(checked) >= 20, blocks
    cut = [b for b in checked if b["scroll"] > b["client"] + 1]
    assert not cut, cut
    page.close()


def test_node_self_check_grades_each_job_in_a_fresh_interpreter() -> None:
    """practice/judge.py --self-check 的 Pyodide 部分（Node）：和网页一样，每次评测一个新解释器。

    先运行一份改掉 judge_core 的答案、再运行一份错误答案：解释器要是被复用，错误答案就会显示通过。
    只需要 node 和 node_modules/pyodide，不需要 chromium。
    """
    _require(" Node 的 Pyodide 自检", judge.pyodide_missing())
    tests = [
        {
            "name": "test_visible.py",
            "source": "from solution import f\n\n\ndef test_one():\n    assert f(1) == 2\n",
            "hidden": False,
        }
    ]
    patch = (
        "import sys\n"
        "core = sys.modules['judge_core']\n"
        "def fake(code, tests):\n"
        "    names = [(t.name, n) for t in tests for n in core.list_tests(t.source)]\n"
        "    return core.Report('ok', [core.Outcome(file, n, True) for file, n in names])\n"
        "core._grade = fake\n"
        "def f(x):\n    return x + 1\n"
    )
    wrong = "def f(x):\n    return x\n"
    right = "def f(x):\n    return x + 1\n"
    jobs = [patch, wrong, LEAK_SET + right, LEAK_CHECK + right, INFINITE_LOOP, wrong]
    request = {
        "judge_core": str(judge.JUDGE_CORE),
        "timeout_s": 10,
        "threads": 1,
        "jobs": [{"code": code, "tests": tests} for code in jobs],
    }
    proc = subprocess.run(
        ["node", str(judge.PYODIDE_SCRIPT)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert [r["status"] for r in answer["results"]] == ["ok", "fail", "ok", "ok", "timeout", "fail"]
    assert len(answer["load_ms"]) == len(jobs)  # 每个任务都准备了一个新解释器
