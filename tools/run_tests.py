"""`make test` 的全部内容：lint、内嵌模型校验、逐章切片检查、完整包上的全部测试。

每一步都会运行（前面失败也不中断），最后汇总每一步的结果和用时；任何一步失败则退出码非 0。
命令行上可以只点名其中几步（lint、model、slices、pytest），例如 ``run_tests.py slices``。

两个大步骤各自证明一件事，不重复：

- ``steps.py check``：每一章的切片**单独**能导入、运行 main、通过这一章的测试、和录制的输出一致；
- pytest（完整的包）：工具、判题器（含练习题自检）、页面与网站构建，以及各章的测试在**最终**的
  代码上仍然通过——后面的章节没有弄坏前面章节的测试。切片和最终的包逐字相同、又在同一种设备上
  跑过测试的章节（通常是最后一章），这一步不再重跑。

两步都按 CPU 核数并行（``MINISGL_TEST_JOBS`` 可以改）：切片检查几章同时做，pytest 用
pytest-xdist 按文件分给几个进程（同一个文件里共用的服务只起一次）。
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
sys.path.insert(0, str(REPO / "tools"))

import steps  # noqa: E402 —— 和本文件在同一个目录

PYTEST_PATHS = ["tools/tests", "practice/tests", "chapters"]


def jobs() -> int:
    """并行数：默认 CPU 核数，最多 8（GPU 机器上核很多，但每个进程都要一份 CUDA 上下文）。"""
    configured = os.environ.get("MINISGL_TEST_JOBS", "").strip()
    if configured:
        return max(1, int(configured))
    return max(1, min(os.cpu_count() or 1, 8))


def test_device() -> str:
    """完整包上的测试用哪个设备：和包里的选法相同（见 chapters/conftest.py）。"""
    code = "from minisgl.utils.device import pick_device; print(pick_device())"
    out = subprocess.run([PY, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def proved_by_slices() -> list[str]:
    """切片和最终的包逐字相同的章节：``steps.py check`` 已经在切片上（CPU）跑过它们的测试。"""
    last = steps.latest_chapter()
    same = []
    for chapter in steps.load_chapters():
        n = chapter.number
        if all(steps.slice_text(f, n) == steps.slice_text(f, last) for f in steps.files_at(n)):
            same.append(f"chapters/{chapter.dir.name}")
    return same


STAGE_KEYS = ["lint", "model", "slices", "pytest"]
# 失败的一步在汇总里重复它输出的最后几行：steps.py check 的最后一行点名没通过的章节，
# pytest 的最后几行是 FAILED 的测试
TAIL_LINES = 6


# 每一步的时限（秒）：正常时用不到一半（2 核的机器上切片和 pytest 各约 10 分钟），只为卡住时
# 按时失败并打出汇总；加起来 75 分钟，再加上准备环境的几分钟，也在 CI 的 90 分钟之内
STAGE_TIMEOUT = {"lint": 300, "model": 300, "slices": 2100, "pytest": 1800}


def stages(n_jobs: int) -> list[tuple[str, str, list[str]]]:
    """(键, 名字, 命令)。键用来在命令行上只跑其中几步：``run_tests.py slices pytest``。"""
    pytest = [PY, "-m", "pytest", "-q", "-n", str(n_jobs), "--dist", "loadfile"]
    pytest += PYTEST_PATHS
    note = ""
    if test_device() == "cpu":
        skipped = proved_by_slices()
        pytest += [f"--ignore={path}" for path in skipped]
        note = f"；不再重跑切片上已经跑过的 {', '.join(skipped)}" if skipped else ""
    return [
        ("lint", "ruff check", [PY, "-m", "ruff", "check", "."]),
        ("lint", "ruff format --check", [PY, "-m", "ruff", "format", "--check", "."]),
        ("model", "内嵌模型与校验清单一致", [PY, "tools/make_tiny_model.py", "--check"]),
        (
            "slices",
            f"steps.py check（每一章的切片，{n_jobs} 章同时）",
            [PY, "tools/steps.py", "check", "--jobs", str(n_jobs)],
        ),
        ("pytest", f"pytest（完整的包，{n_jobs} 个进程{note}）", pytest),
    ]


def run(name: str, cmd: list[str], n_jobs: int, timeout: float) -> tuple[bool, float, list[str]]:
    """运行一步，输出照常打印；返回（是否通过，用时，输出的最后几行）。"""
    print(f"\n===== {name}: {' '.join(cmd[1:] if cmd[0] == PY else cmd)}", flush=True)
    # mkdocs-material 9.x 每次构建都打印一大段停止维护的提示，与测试无关
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    # 几个进程同时跑时，各自的 torch 只开自己那一份核：每个都按全部核数开线程只会互相抢
    # （16 核的机器上 8 章同时检查，就是上百个线程抢 16 个核）
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n_jobs)))

    def echo(line: str) -> None:
        sys.stdout.write(line)
        sys.stdout.flush()

    # 输出原样转印（不是合法 UTF-8 的字节换成替换字符）；超时、留下了进程都算这一步失败
    r = steps.run_bounded(cmd, cwd=REPO, env=env, timeout=timeout, echo=echo)
    problem = r.problem()
    if problem:
        print(problem, flush=True)
    lines = [line.rstrip() for line in r.report().splitlines() if line.strip()]
    return r.ok, r.seconds, lines[-TAIL_LINES:]


def main(argv: list[str]) -> int:
    wanted = argv or STAGE_KEYS
    unknown = sorted(set(wanted) - set(STAGE_KEYS))
    if unknown:
        choices = ", ".join(STAGE_KEYS)
        print(f"不认识的步骤：{', '.join(unknown)}（可选：{choices}）", file=sys.stderr)
        return 2
    start = time.perf_counter()
    n_jobs = jobs()
    chosen = [stage for stage in stages(n_jobs) if stage[0] in wanted]
    results = [(name, *run(name, cmd, n_jobs, STAGE_TIMEOUT[key])) for key, name, cmd in chosen]
    print(f"\n===== 汇总（共 {(time.perf_counter() - start) / 60:.1f} 分钟）")
    for name, ok, secs, tail in results:
        print(f"  {'✓' if ok else '✗'} {name}（{secs:.0f}s）")
        if not ok:  # 日志只留末尾时（CI 常常这样），失败的原因也要在这里看得到
            print("\n".join(f"      {line}" for line in tail))
    failed = [name for name, ok, _, _ in results if not ok]
    if failed:
        print(f"\n失败的步骤：{'、'.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
