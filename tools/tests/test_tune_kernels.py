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


def test_offline_inputs_follow_the_engines_slots() -> None:
    """三个请求（提示 3、5、2 个 token，输出 2、4、3 个）到 decode 第 1 步：第一个已经生成完，
    后两个各有提示 + 2 个 token；提示的槽位连续，decode 的槽位每一步依次分给还在跑的请求。"""
    q, k, _, table, rows, lens = tune_kernels.offline_attention_inputs(
        [3, 5, 2], [2, 4, 3], 1, 1, 16, torch.float32, "cpu", 0
    )
    assert rows.tolist() == [1, 2] and lens.tolist() == [7, 4] and q.shape == (2, 2, 16)
    assert table[1, :7].tolist() == [3, 4, 5, 6, 7, 11, 13]
    assert table[2, :4].tolist() == [8, 9, 12, 14]
    assert table[0, :4].tolist() == [0, 1, 2, 10] and k.shape[0] == 15


def test_offline_inputs_of_the_benchmark_workload() -> None:
    """第 0 步所有请求都在跑，KV 是全部提示再加每个请求 1 个 token（基准测试离线那一行的负载）；
    每个请求读到的槽位各不相同。"""
    input_lens, output_lens = tune_kernels.offline_lengths()
    _, k, _, table, rows, lens = tune_kernels.offline_attention_inputs(
        input_lens, output_lens, 0, 1, 2, torch.float32, "cpu", 0
    )
    assert len(rows) == len(input_lens) == 256
    assert int(lens.sum()) == sum(input_lens) + len(input_lens) == k.shape[0]
    slots = torch.cat([table[r, :n] for r, n in zip(rows.tolist(), lens.tolist())])
    assert slots.unique().numel() == slots.numel()


def test_decode_attention_is_right_on_offline_inputs() -> None:
    """离线负载那样长短不一、槽位散开的输入上，``--offline`` 试的分块算得对（解释器里）。"""
    inputs = tune_kernels.offline_attention_inputs(
        [40, 130, 7, 65], [3, 70, 90, 2], 5, 2, 32, torch.float32, "cpu", 0
    )
    for splits in (1, 2, 8):
        with tune_kernels.decode_tiles(splits, {"BLOCK_N": 32, "num_warps": 4, "num_stages": 2}):
            got = triton_attn.decode_attention(*inputs)
        assert (got - tune_kernels.reference_attention(*inputs)).abs().max() < 1e-4
