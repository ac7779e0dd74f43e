"""``tools/extend_gqa_ab.py``：GQA 打包的候选写法在 Triton 的解释器上和现在的 ``extend_attention``
对得上（带前缀、长短不一、组的大小是 2、1 和 3）。GPU 上的计时这里不测。"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import extend_gqa_ab as ab  # noqa: E402


@pytest.mark.parametrize("heads", [(4, 2, 16), (2, 2, 16), (6, 2, 16)], ids=["g2", "g1", "g3"])
def test_candidates_match_the_current_kernel(heads: tuple[int, int, int]) -> None:
    case = ab.make_case([45, 20, 1, 70], [0, 150, 37, 5], torch.device("cpu"), torch.float32, heads)
    row = ab.compare(case, ab.CHECK_CONFIGS, timed=False)
    diffs = [v["max_diff"] for k, v in row.items() if k.startswith("packed")]
    assert len(diffs) == 2 * len(ab.CHECK_CONFIGS) and max(diffs) < 1e-4


def test_check_mode_exits_zero() -> None:
    assert ab.main(["--check"]) == 0
