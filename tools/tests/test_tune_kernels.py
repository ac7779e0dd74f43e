"""``tools/tune_kernels.py``：没有 GPU 时的 ``--check`` 真的在核对——被试的参数确实用上了，
算错的时候会报出来。GPU 上的计时这里不测（测试里不做计时）。"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tune_kernels  # noqa: E402

triton_attn = tune_kernels.triton_attn
pytestmark = pytest.mark.skipif(
    not triton_attn.TRITON_AVAILABLE or torch.cuda.is_available(),
    reason="--check 是给没有 GPU 的机器用的（解释器）",
)


def test_check_runs_a_few_configs_of_each_kind() -> None:
    # 每个批大小（4 个）和每个 M（2 个）各 2 组
    assert tune_kernels.check(limit=2) == 2 * (len(tune_kernels.ATTN_SPLITS) + 2)


def test_decode_tiles_are_used_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []
    kernel = triton_attn._decode_partial_kernel

    class Spy:
        def __getitem__(self, grid):  # type: ignore[no-untyped-def]
            def launch(*args, **kwargs):  # type: ignore[no-untyped-def]
                seen.append((grid[2], kwargs["BLOCK_N"]))
                return kernel[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(triton_attn, "_decode_partial_kernel", Spy())
    inputs = tune_kernels.attention_inputs(2, 40, 2, 32, torch.float32, "cpu", 0, True)
    before = (triton_attn.NUM_SPLITS, triton_attn.BLOCK_N, triton_attn.decode_tiles_cuda)
    with tune_kernels.decode_tiles(4, {"BLOCK_N": 64, "num_warps": 2, "num_stages": 2}):
        triton_attn.decode_attention(*inputs)
    assert seen == [(4, 64)]
    assert (triton_attn.NUM_SPLITS, triton_attn.BLOCK_N, triton_attn.decode_tiles_cuda) == before


def test_check_catches_a_wrong_result(monkeypatch: pytest.MonkeyPatch) -> None:
    real = tune_kernels.triton_linear.linear_small_m
    monkeypatch.setattr(
        tune_kernels.triton_linear, "linear_small_m", lambda *a, **k: real(*a, **k) * 1.01
    )
    with pytest.raises(AssertionError, match="linear M=1"):
        tune_kernels.check(limit=1)
