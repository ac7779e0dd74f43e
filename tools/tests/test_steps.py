"""steps.py 自己的测试：标记语法、错误信息、切片、统计、文件树、摘录、录制头部。"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import steps  # noqa: E402
from steps import StepsError, parse_markers  # noqa: E402

KNOWN = {1, 2, 3, 5}


def sliced(text: str, n: int, first: int = 1) -> str:
    lines = parse_markers(textwrap.dedent(text), "x.py", first, KNOWN)
    return "".join(ln.text + "\n" for ln in lines if ln.lo <= n < ln.hi)


def test_add_and_remove_blocks() -> None:
    src = """\
    def f():
        x = 1
        # >> ch03
        x += 2
        # << ch03
        # ~~ ch01 < ch03
        #~ return x
        # ~~
        # >> ch03
        return x * 10
        # << ch03
    """
    assert sliced(src, 1) == "def f():\n    x = 1\n    return x\n"
    assert sliced(src, 2) == sliced(src, 1)
    assert sliced(src, 3) == "def f():\n    x = 1\n    x += 2\n    return x * 10\n"
    assert sliced(src, 5) == sliced(src, 3)


def test_removed_lines_survive_ruff_format() -> None:
    """ruff format 把 '#~ x' 改写成 '# ~ x'：两种写法切出来一样。"""
    raw = "def f():\n    # ~~ ch01 < ch02\n    #~ return 1\n    # ~~\n    return 2\n"
    formatted = raw.replace("#~ return", "# ~ return")
    for n in (1, 2):
        assert sliced(raw, n) == sliced(formatted, n)
    assert sliced(formatted, 1) == "def f():\n    return 1\n    return 2\n"


def test_bare_removed_line_is_an_empty_line() -> None:
    """删除块里只写 '#~'（ruff format 之后是 '# ~'）的行在切片里是空行，不留缩进。"""
    src = """\
    class A:
        # ~~ ch01 < ch02
        # ~ x = 1
        # ~
        #~
        # ~ y = 2
        # ~~
    """
    assert sliced(src, 1) == "class A:\n    x = 1\n\n\n    y = 2\n"


def test_nested_blocks_take_the_intersection() -> None:
    src = """\
    a = 0
    # >> ch02
    b = 1
    # ~~ ch02 < ch05
    #~ c = 2
    # ~~
    # << ch02
    """
    assert sliced(src, 1) == "a = 0\n"
    assert sliced(src, 2) == "a = 0\nb = 1\nc = 2\n"
    assert sliced(src, 5) == "a = 0\nb = 1\n"


@pytest.mark.parametrize(
    ("src", "message", "line"),
    [
        ("# >> ch02\nx = 1\n", "直到文件末尾都没有闭合", 1),
        ("x = 1\n# << ch02\n", "没有对应的", 2),
        ("# >> ch02\nx = 1\n# << ch03\n", "不匹配", 3),
        ("# >> ch04\nx = 1\n# << ch04\n", "未知的章 ch04", 1),
        ("# ~~ ch03 < ch03\n#~ x = 1\n# ~~\n", "结束章必须晚于开始章", 1),
        ("# ~~ ch03 < ch02\n#~ x = 1\n# ~~\n", "结束章必须晚于开始章", 1),
        ("# ~~ ch01 < ch03\nx = 1\n# ~~\n", "都要写成 '#~ <代码>'", 2),
        ("x = 1\n#~ y = 2\n", "只能出现在删除块", 2),
        ("# ~~\n", "没有对应的 '# ~~ chA < chB'", 1),
        ("# >>ch02\n", "无法识别的标记", 1),
        ("# ~~ ch01 < ch03\n# >> ch02\n# << ch02\n# ~~\n", "不能再嵌套", 2),
    ],
)
def test_malformed_markers_name_file_and_line(src: str, message: str, line: int) -> None:
    with pytest.raises(StepsError) as e:
        parse_markers(src, "minisgl/x.py", 1, KNOWN)
    assert message in str(e.value)
    assert str(e.value).startswith(f"minisgl/x.py:{line}:")


def test_marker_before_or_at_home_chapter_is_rejected() -> None:
    with pytest.raises(StepsError, match="不晚于所在文件的起始章"):
        parse_markers("# >> ch02\nx = 1\n# << ch02\n", "minisgl/x.py", 3, KNOWN)
    with pytest.raises(StepsError, match="早于这段代码出现的第 3 章"):
        parse_markers("# ~~ ch02 < ch05\n#~ x = 1\n# ~~\n", "minisgl/x.py", 3, KNOWN)
    with pytest.raises(StepsError, match="不晚于外层标记"):
        parse_markers("# >> ch03\n# >> ch02\n# << ch02\n# << ch03\n", "m.py", 1, KNOWN)


def test_excerpt_by_qualname() -> None:
    text = textwrap.dedent(
        """\
        import os

        class A:
            x: int = 1

            @staticmethod
            def f() -> int:
                return 1

        B = A()
        """
    )
    ex = steps.excerpt_text(text, "A.f", "m.py")
    assert (ex.start, ex.end) == (6, 8)
    assert ex.code == "@staticmethod\ndef f() -> int:\n    return 1\n"
    assert steps.excerpt_text(text, "B", "m.py").code == "B = A()\n"
    assert steps.excerpt_text(text, "", "m.py").end == 10
    with pytest.raises(StepsError, match="找不到 'A.g'"):
        steps.excerpt_text(text, "A.g", "m.py")


# ---------------------------------------------------------------- 一个迷你仓库


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(
        tmp_path / "chapters/01-one/chapter.toml",
        'title = "一"\npart = "P"\nnew = ["__init__.py", "a.py"]\n',
    )
    write(
        tmp_path / "chapters/02-two/chapter.toml",
        'title = "二"\npart = "P"\nnew = ["sub/__init__.py", "sub/b.py"]\nearly = ["c.py"]\n',
    )
    write(tmp_path / "chapters/03-three/chapter.toml", 'title = "三"\npart = "P"\nnew = ["c.py"]\n')
    write(tmp_path / "minisgl/__init__.py", '"""包。"""\n')
    write(
        tmp_path / "minisgl/a.py",
        """\
        def f() -> int:
            # ~~ ch01 < ch02
            #~ return 1
            # ~~
            # >> ch02
            return 2
            # << ch02
        """,
    )
    write(tmp_path / "minisgl/sub/__init__.py", "")
    write(tmp_path / "minisgl/sub/b.py", "B = 1\n")
    write(tmp_path / "minisgl/c.py", "C = 1\n# >> ch03\nD = 2\n# << ch03\n")
    monkeypatch.setattr(steps, "REPO", tmp_path)
    steps.reset_caches()
    yield tmp_path
    steps.reset_caches()


def test_stats_tree_and_diff(repo: Path) -> None:
    assert steps.stats_line(1) == "到这一章为止的文件：2 个（新建 2，修改 0，提前引入 0）"
    assert steps.stats_line(2) == "到这一章为止的文件：5 个（新建 2，修改 1，提前引入 1）"
    assert steps.stats_line(3) == "到这一章为止的文件：5 个（新建 1，修改 1，提前引入 0）"
    assert steps.tree_text(2).splitlines() == [
        "minisgl/",
        "├── __init__.py",
        "├── a.py  ← 本章修改",
        "├── c.py  ← 提前引入",
        "├── sub/",
        "│   ├── __init__.py  ← 本章新建",
        "│   ├── b.py  ← 本章新建",
    ]
    assert "├── sub/  （2 个文件，不变）" in steps.tree_text(3)
    assert steps.new_files_line(2) == (
        "本章要写的文件：sub/__init__.py、sub/b.py。要修改的文件：a.py。提前引入：c.py。"
    )
    d = steps.diff(2)
    assert "-    return 1" in d and "+    return 2" in d


def test_no_trailing_blank_lines_after_a_cut_block(repo: Path) -> None:
    write(repo / "minisgl/c.py", "C = 1\n\n\n# >> ch03\nD = 2\n# << ch03\n")
    steps.reset_caches()
    assert steps.slice_text("c.py", 2) == "C = 1\n"
    assert steps.slice_text("c.py", 3) == "C = 1\n\n\nD = 2\n"


def test_slices(repo: Path) -> None:
    assert steps.slice_text("c.py", 1) is None
    assert steps.slice_text("c.py", 2) == "C = 1\n"
    assert steps.slice_text("c.py", 3) == "C = 1\nD = 2\n"
    assert steps.files_at(1) == ["__init__.py", "a.py"]
    ex = steps.excerpt(2, "a.py", "f")
    assert ex.code == "def f() -> int:\n    return 2\n" and ex.path == "minisgl/a.py"
    with pytest.raises(StepsError, match="第 1 章还没有 minisgl/c.py"):
        steps.excerpt(1, "c.py", "")


def test_build_writes_the_slice(repo: Path, tmp_path: Path) -> None:
    write(repo / "chapters/02-two/main.py", "print('hi')\n")
    write(repo / "chapters/02-two/test_ch02_x.py", "def test_x():\n    assert True\n")
    write(repo / "chapters/conftest.py", "")
    write(repo / "pyproject.toml", "")
    steps.reset_caches()
    out = steps.build(2, tmp_path / "out")
    assert (out / "minisgl/a.py").read_text() == "def f() -> int:\n    return 2\n"
    assert (out / "minisgl/c.py").read_text() == "C = 1\n"
    assert (out / "chapters/02-two/test_ch02_x.py").exists()
    assert not (out / "minisgl/sub/__pycache__").exists()


RUFF_CONFIG = """\
[tool.ruff]
line-length = 100

[tool.ruff.lint]
select = ["E", "F", "W", "I"]
"""


def test_check_runs_ruff_on_the_slice(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """每一章的切片都要过 ruff：只有后面章节才用到的 import 在前面的切片里是 F401，
    切掉一块后多出来的空行 ruff format 不认。``check`` 的最后一行点名没通过的章节和步骤。"""
    for chapter in ("02-two", "03-three"):
        write(repo / f"chapters/{chapter}/main.py", "print('hi')\n")
    write(repo / "chapters/conftest.py", "")
    write(repo / "pyproject.toml", RUFF_CONFIG)
    write(repo / "minisgl/c.py", "import os\n\nC = 1\n# >> ch03\nD = os.sep\n# << ch03\n")
    steps.reset_caches()
    failed, log = steps._check_one(2, keep=False)
    assert failed == "ruff check、ruff format --check"
    assert "✗ ruff check" in log and "F401" in log and "`os` imported but unused" in log
    assert "切片导入" not in log  # ruff 不过，后面的步骤不再运行
    monkeypatch.setattr(steps, "_ensure_models", lambda: None)
    assert not steps.check([2])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "没有通过：第 2 章（ruff check、ruff format --check）"
    assert steps.lint_slice(steps.build(3, tmp_path / "out3")) == ""

    # 块外的空行每一章都有：第 3 章的切片是干净的，第 2 章的切片里 C 和 E 之间空了 4 行
    write(repo / "minisgl/c.py", "C = 1\n\n\n# >> ch03\nD = 2\n# << ch03\n\n\nE = 3\n")
    steps.reset_caches()
    assert steps.lint_slice(steps.build(3, tmp_path / "out3")) == ""
    problems = steps.lint_slice(steps.build(2, tmp_path / "out2"))
    assert "$ ruff format --check --diff minisgl" in problems
    assert "1 file would be reformatted" in problems


def test_check_fails_a_main_that_hangs_and_shows_where(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """卡住的 main 到时失败：日志里有超时的说明和卡住时的 Python 栈，后面的步骤不再运行。"""
    main = "import time\n\n\ndef wait():\n    time.sleep(600)\n\n\nwait()\n"
    write(repo / "chapters/01-one/main.py", main)
    write(repo / "chapters/conftest.py", "")
    write(repo / "pyproject.toml", RUFF_CONFIG)
    steps.reset_caches()
    monkeypatch.setattr(steps, "MAIN_TIMEOUT", 3)
    failed, log = steps._check_one(1, keep=False)
    assert failed == "main（cpu）"
    assert "超时：3 秒还没有结束" in log
    assert "in wait" in log and 'main.py", line 5' in log  # faulthandler 打出的栈
    assert "录制" not in log and "测试" not in log


# 起一个换了会话的孙进程（握着同一个输出管道），然后自己睡下或者退出
SPAWN_GRANDCHILD = """\
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True)
print("grandchild", child.pid, flush=True)
"""


def _grandchild(output: str) -> int:
    return int(output.split("grandchild ")[1].split()[0])


def test_run_bounded_kills_a_hung_command_with_everything_it_started() -> None:
    code = SPAWN_GRANDCHILD + "time.sleep(600)\n"
    r = steps.run_bounded([sys.executable, "-c", code], cwd=".", env=dict(os.environ), timeout=3)
    assert r.returncode is None and not r.ok and r.seconds < 60
    # 两个进程的栈各自完整（一个一个打印，不交错）
    assert r.output.count("Fatal Python error: Aborted\n") == 2, r.output
    assert '<string>", line 5' in r.output and '<string>", line 1' in r.output
    assert r.problem().startswith("超时：3 秒")
    assert not psutil.pid_exists(_grandchild(r.output))


def test_run_bounded_reports_and_kills_what_a_finished_command_left_behind() -> None:
    lines: list[str] = []
    r = steps.run_bounded(
        [sys.executable, "-c", SPAWN_GRANDCHILD],
        cwd=".",
        env=dict(os.environ),
        timeout=60,
        echo=lines.append,
        grace=1,
    )
    assert r.returncode == 0 and not r.ok
    assert len(r.leftovers) == 1 and "time.sleep(600)" in r.leftovers[0]
    assert "留下了 1 个进程" in r.problem()
    assert not psutil.pid_exists(_grandchild(r.output))
    assert "".join(lines) == r.output


def test_run_bounded_outer_timeout_reaches_processes_of_an_inner_run() -> None:
    """套着运行（run_tests.py → steps.py check）：外层超时，里层起的进程也一起收拾。"""
    inner = (
        "import os, sys; sys.path.insert(0, sys.argv[1]); import steps; "
        f"steps.run_bounded([sys.executable, '-c', {SPAWN_GRANDCHILD + 'time.sleep(600)'!r}], "
        "cwd='.', env=dict(os.environ), timeout=600, echo=print)"
    )
    tools = str(Path(steps.__file__).parent)
    r = steps.run_bounded(
        [sys.executable, "-c", inner, tools], cwd=".", env=dict(os.environ), timeout=5
    )
    assert r.returncode is None
    assert not psutil.pid_exists(_grandchild(r.output))


def test_run_bounded_plain_success() -> None:
    r = steps.run_bounded(
        [sys.executable, "-c", "print('你好')"], cwd=".", env=dict(os.environ), timeout=60
    )
    assert r.ok and r.output == "你好\n" and r.problem() == ""


def test_slice_that_does_not_compile_names_the_source_line(repo: Path) -> None:
    write(
        repo / "minisgl/a.py",
        """\
        def f() -> int:
            # >> ch02
            return 2
            # << ch02
        """,
    )
    steps.reset_caches()
    with pytest.raises(
        StepsError, match=r"minisgl/a.py:\?: 第 1 章的切片无法编译|minisgl/a.py:1: 第 1 章"
    ):
        steps.compile_slice(1)
    steps.compile_slice(2)


def test_manifest_errors(repo: Path) -> None:
    write(repo / "minisgl/orphan.py", "")
    steps.reset_caches()
    with pytest.raises(StepsError, match="没有归属章.*orphan.py"):
        steps.validate()
    (repo / "minisgl/orphan.py").unlink()
    write(
        repo / "chapters/03-three/chapter.toml",
        'title = "三"\npart = "P"\nnew = ["c.py", "a.py"]\n',
    )
    steps.reset_caches()
    with pytest.raises(StepsError, match="a.py 已经是第 1 章的新文件"):
        steps.validate()
    write(
        repo / "chapters/03-three/chapter.toml",
        'title = "三"\npart = "P"\nnew = ["c.py", "zz.py"]\n',
    )
    steps.reset_caches()
    with pytest.raises(StepsError, match="minisgl/zz.py 不存在"):
        steps.validate()


def test_recording_header_and_normalization(repo: Path) -> None:
    write(repo / "chapters/01-one/output.cpu.txt", "# 命令：x\n# 设备：cpu\n# ---\nhi\n")
    steps.reset_caches()
    with pytest.raises(StepsError, match="头部缺少"):
        steps.read_recording(1)
    head = "".join(f"# {k}：v\n" for k in steps._HEADER_KEYS)
    write(repo / "chapters/01-one/output.cpu.txt", head + "# ---\n用时 1.25s，3 毫秒\n")
    header, body = steps.read_recording(1)
    assert header["设备"] == "v" and body == "用时 1.25s，3 毫秒\n"
    assert steps.normalize(body, []) == steps.normalize("用时 9.5 s，12 毫秒", [])
    assert steps.normalize("内存 3.2 GiB", [r"\d+\.\d GiB"]) == "内存 <…>"


def test_tp_recordings_have_their_own_file_and_need_gpus(repo: Path) -> None:
    c = steps.get_chapter(1)
    assert steps.recording_path(c, "cuda.tp2").name == "output.cuda.tp2.txt"
    got = steps.recording_path(c, "cuda.tp2", "models/qwen3-0.6b-shape").name
    assert got == "output.cuda.tp2.qwen3-0.6b-shape.txt"
    with pytest.raises(StepsError, match="只用于 GPU"):
        steps.record(1, "cpu", tp=2)


def test_demo_is_the_last_chapter_marked_demo(repo: Path) -> None:
    assert steps._parse_chapter("demo") == steps._parse_chapter("latest") == 3  # 没有标记时
    toml = repo / "chapters/02-two/chapter.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + "demo = true\n", encoding="utf-8")
    steps.reset_caches()
    assert steps._parse_chapter("demo") == 2 and steps.latest_chapter() == 3


def test_a_file_inlined_into_another_before_its_home_chapter(repo: Path) -> None:
    """'# ++ part.py < ch03'：第 3 章之前，part.py 的代码（去掉开头）写在 a.py 里，
    它的 import 并进 a.py 的 import 块；并入时从宿主文件导入的那一行去掉。"""
    write(repo / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    write(
        repo / "chapters/03-three/chapter.toml",
        'title = "三"\npart = "P"\nnew = ["c.py", "part.py"]\n',
    )
    write(
        repo / "minisgl/a.py",
        '''\
        """宿主。"""

        import os

        # >> ch03
        from .part import g
        # << ch03
        # ++ part.py < ch03


        def f() -> int:
            return g() + len(os.sep)
        ''',
    )
    write(
        repo / "minisgl/part.py",
        '''\
        """拆出去的部分。"""

        import os
        from collections import OrderedDict

        from .a import f

        __all__ = ["g"]

        # >> ch02
        import sys

        # << ch02


        def g() -> int:
            # >> ch02
            print(sys.argv, f)
            # << ch02
            return len(os.sep) + len(OrderedDict())
        ''',
    )
    steps.reset_caches()
    one = steps.slice_text("a.py", 1)
    assert one is not None
    assert one.startswith(
        '"""宿主。"""\n\nimport os\nfrom collections import OrderedDict\n\n\ndef g()'
    )
    assert "from .a import" not in one and "__all__" not in one and "sys" not in one
    assert one.endswith("def f() -> int:\n    return g() + len(os.sep)\n")
    two = steps.slice_text("a.py", 2)
    assert two is not None and "import os\nimport sys\nfrom collections" in two
    assert "    print(sys.argv, f)\n" in two
    assert steps.slice_text("part.py", 2) is None and "part.py" not in steps.files_at(2)
    three = steps.slice_text("a.py", 3)
    assert three == '"""宿主。"""\n\nimport os\n\nfrom .part import g\n\n\ndef f() -> int:\n' + (
        "    return g() + len(os.sep)\n"
    )
    assert "from .a import f" in (steps.slice_text("part.py", 3) or "")
    assert steps.stats_line(3) == "到这一章为止的文件：6 个（新建 2，修改 2，提前引入 0）"

    write(repo / "minisgl/a.py", "# ++ part.py < ch02\n")
    steps.reset_caches()
    with pytest.raises(StepsError, match=r"a.py:1: .*part.py 从第 3 章起.*'< ch03'"):
        steps.validate()


def test_final_package_keeps_few_replaced_lines_and_blocks_inside_one_function() -> None:
    """最终的包读起来要像一份普通的代码：被后面章节替换掉的旧代码（'#~' 行）全部加起来不超过
    15 行；没有一个标记块从一个函数里开始、到另一个函数里才结束。"""
    import ast

    package = Path(__file__).resolve().parents[2] / "minisgl"
    replaced = 0
    spans: list[str] = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        replaced += sum(1 for ln in lines if steps._DELETED_LINE.match(ln))
        funcs = [
            (node.lineno, node.end_lineno or node.lineno)
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        opened: list[int] = []
        for i, line in enumerate(lines, 1):
            if steps._OPEN_ADD.match(line) or steps._OPEN_DEL.match(line):
                opened.append(i)
                continue
            if not (steps._CLOSE_ADD.match(line) or steps._CLOSE_DEL.match(line)) or not opened:
                continue
            start = opened.pop()
            for lo, hi in funcs:
                # 块在函数里开始、函数结束之后还有代码才闭合；或者在函数外开始、在函数里闭合
                tail = [
                    ln for ln in lines[hi : i - 1] if ln.strip() and not ln.strip().startswith("#")
                ]
                if (lo < start <= hi and i > hi and tail) or (start < lo and lo <= i <= hi):
                    spans.append(f"{path.relative_to(package.parent)}:{start}-{i}")
    assert replaced <= 15, f"最终的包里还有 {replaced} 行 '#~'"
    assert not spans, f"这些标记块跨了函数：{spans}"
