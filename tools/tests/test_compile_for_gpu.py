"""``tools/compile_for_gpu.py``：包里的每个 Triton kernel，按 GPU 上的开关和分块，不用 GPU 编译到
sm_90。这是 GPU 编译这一步在 CPU 上的孪生测试：解释器跑得通的 kernel，编译器未必接受；依赖启动、
``PRECISE`` 这些只在 GPU 上打开的分支，解释器一次也不走。

脚本要关掉解释器（导入 triton 之前），所以在子进程里跑。"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "compile_for_gpu.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args], cwd=REPO, capture_output=True, text=True, timeout=900
    )


def test_every_kernel_compiles_for_hopper_with_the_gpu_switches() -> None:
    listed = _run("--list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    launches = listed.stdout.splitlines()
    names = {line.split("[", 1)[0] for line in launches}
    # 包里的每个 kernel 都有（脚本自己也查：少了哪个就报错退出）
    for kernel in ("_extend_kernel", "_decode_partial_kernel", "_decode_reduce_kernel",
                   "_linear_kernel", "_splitk_sum_kernel", "_linear_silu_kernel",
                   "_rmsnorm_kernel", "_qk_norm_rope_kernel", "_silu_and_mul_kernel",
                   "_store_cache_kernel", "_rope_kernel"):  # fmt: skip
        assert kernel in names
    # GPU 上才打开的开关都打开了：有 PDL 参数的每一个都是 True，PRECISE 也是
    assert not any("PDL=False" in line or "PRECISE=False" in line for line in launches)
    assert sum("PDL=True" in line for line in launches) > 20
    # decode 注意力按 GPU 上挑的分块编译：batch 1 那一档是 16 段、8 个 warp
    assert any(
        line.startswith("_decode_partial_kernel[bf16]") and "NUM_SPLITS=16" in line
        and "num_warps=8" in line
        for line in launches
    )  # fmt: skip

    # Hopper 之前的架构没有依赖启动：--arch 80 时 PDL 全关着，其余一样
    ampere = _run("--arch", "80", "--list").stdout.splitlines()
    assert ampere == [line.replace("PDL=True", "PDL=False") for line in launches]

    compiled = _run()
    assert compiled.returncode == 0, compiled.stdout[-3000:] + compiled.stderr[-3000:]
    assert f"{len(launches)}/{len(launches)} launches compiled for sm_90" in compiled.stdout
    sizes = [int(n) for n in re.findall(r"^ok .*: (\d+) bytes", compiled.stdout, re.MULTILINE)]
    assert len(sizes) == len(launches) and min(sizes) > 1000  # 每一个都有 cubin
    assert re.search(r"most shared memory: \d+ bytes, _\w+_kernel\[", compiled.stdout)
