"""`make test` 的全部内容：lint、工具自测、逐章切片检查、判题器自检、站点构建、完整包上的全部测试。

每一步都会运行（前面失败也不中断），最后汇总；任何一步失败则退出码非 0。
pytest 放在最后，让它的汇总行成为输出的最后一行。
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable

STEPS: list[tuple[str, list[str]]] = [
    ("ruff check", [PY, "-m", "ruff", "check", "."]),
    ("ruff format --check", [PY, "-m", "ruff", "format", "--check", "."]),
    ("内嵌模型与校验清单一致", [PY, "tools/make_tiny_model.py", "--check"]),
    ("steps.py check（每一章的切片）", [PY, "tools/steps.py", "check"]),
    ("judge.py --self-check", [PY, "practice/judge.py", "--self-check"]),
    ("mkdocs build --strict", [PY, "-m", "mkdocs", "build", "--strict", "-q", "-d", ".cache/site"]),
]
PYTEST = [PY, "-m", "pytest", "-q", "tools/tests", "practice/tests", "chapters"]


def run(name: str, cmd: list[str]) -> tuple[bool, float]:
    print(f"\n===== {name}: {' '.join(cmd[1:] if cmd[0] == PY else cmd)}", flush=True)
    t = time.perf_counter()
    # mkdocs-material 9.x 每次构建都打印一大段停止维护的提示，与测试无关
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    code = subprocess.run(cmd, cwd=REPO, env=env).returncode
    return code == 0, time.perf_counter() - t


def main() -> int:
    results = [(name, *run(name, cmd)) for name, cmd in STEPS]
    print("\n===== 汇总（pytest 在最后）")
    for name, ok, secs in results:
        print(f"  {'✓' if ok else '✗'} {name}（{secs:.0f}s）")
    failed = [name for name, ok, _ in results if not ok]
    ok, _ = run("pytest（完整的包：工具、判题器、所有章节的测试、页面模板）", PYTEST)
    if not ok:
        failed.append("pytest")
    if failed:
        print(f"\n失败的步骤：{'、'.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
