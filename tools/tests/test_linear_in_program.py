"""``tools/linear_in_program.py``：程序内切 K 的线性层在 Triton 的解释器上和 ``F.linear`` 对得上
（几种行数、切段、越界的列、连着 SiLU-mul）。GPU 上的计时这里不测。"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import linear_in_program as lip  # noqa: E402

from minisgl.kernel.triton_linear import LinearConfig  # noqa: E402

# 一段两块（K = 256 = 4 段 × 64）和一段四块（2 段 × 128）
CONFIGS = [LinearConfig(16, 32, 4, 4, 1), LinearConfig(32, 32, 2, 2, 2)]


@pytest.mark.parametrize("m", [1, 3, 8, 16])
@pytest.mark.parametrize("config", CONFIGS, ids=["16n-4s", "32n-2s"])
def test_matches_f_linear(m: int, config: LinearConfig) -> None:
    gen = torch.Generator().manual_seed(m)  # 72 行：最后一块不满
    x, w = torch.randn(m, 256, generator=gen), torch.randn(72, 256, generator=gen)
    torch.testing.assert_close(lip.linear_in_program(x, w, config), F.linear(x, w))


@pytest.mark.parametrize("m", [1, 5, 16])
@pytest.mark.parametrize("config", CONFIGS, ids=["16n-4s", "32n-2s"])
def test_gate_up_pairs_each_gate_with_its_up(m: int, config: LinearConfig) -> None:
    """前 36 行是 gate、后 36 行是 up：每个程序的一半行是 gate，另一半是同样位置的 up。"""
    gen = torch.Generator().manual_seed(m)
    x, w = torch.randn(m, 256, generator=gen), torch.randn(72, 256, generator=gen)
    gate, up = F.linear(x, w).chunk(2, dim=-1)
    got = lip.linear_in_program(x, w, config, silu=True)
    assert got.shape == (m, 36)
    torch.testing.assert_close(got, F.silu(gate) * up, rtol=1e-4, atol=1e-3)


def test_rejects_k_that_does_not_split_evenly() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        lip.linear_in_program(torch.randn(2, 200), torch.randn(32, 200), CONFIGS[0])


def test_projection_names_follow_the_qwen3_shapes() -> None:
    assert lip.projection_name(torch.empty(4096, 1024)) == "qkv"
    assert lip.projection_name(torch.empty(6144, 1024)) == "gate_up"
    assert lip.projection_name(torch.empty(151936, 1024)) is None  # lm_head
