"""演示模型在引擎里答得对，引擎一坏就答不对。

- 通过真正的服务、官方 ``openai`` 客户端，每类 50 道训练时没见过的题（共 300 道），每类至少 95 %
  答对，打招呼全对；
- 正确性的试金石：故意弄坏引擎的一处（decode 的位置忘了加上已有的长度、把一个请求的 K/V 写进
  另一个请求的槽位、跳过 RoPE），四类有标准答案的题的准确率就垮掉；位置只差一这种细小的错，
  准确率也掉到完好的引擎必须达到的 95 % 以下。读者改自己的引擎时，也可以这样用它。
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from minisgl.server.args import DEFAULT_MODEL as MODEL

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import chat_quality  # noqa: E402
from chat_curriculum import Example, make_examples, score  # noqa: E402

ORACLE_TASKS = ("add_sub", "sort", "reverse", "repeat")


def test_quality_through_the_real_server() -> None:
    from minisgl.server.launch import start_background_server

    server = start_background_server(str(MODEL), "--dtype", "float32", name="demo-quality")
    try:
        scores = chat_quality.measure(server.url, per_task=50)
    finally:
        assert server.stop() == 0
    report = chat_quality.table(scores) + "".join(f"\n{s.task}: {s.wrong}" for s in scores)
    assert [s.total for s in scores] == [50] * 6
    for s in scores:
        assert s.accuracy >= 0.95, report
    assert {s.task: s.accuracy for s in scores}["greeting"] == 1.0, report


def _accuracy(llm: Any, examples: list[Example]) -> float:
    from minisgl.core import SamplingParams

    tok = llm.tokenizer
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": ex.prompt}], tokenize=False, add_generation_prompt=True
        )
        for ex in examples
    ]
    outs = llm.generate(prompts, SamplingParams(max_tokens=48))
    return sum(score(ex, out.text) for ex, out in zip(examples, outs)) / len(examples)


def _corrupt_batches(monkeypatch: pytest.MonkeyPatch, corrupt: Callable[[Any], None]) -> None:
    """每个批次送进 ``Engine.forward_batch`` 之前先被 ``corrupt`` 改一处。"""
    from minisgl.engine.engine import Engine

    forward_batch = Engine.forward_batch

    def broken(self: Engine, batch: Any) -> Any:
        corrupt(batch)
        return forward_batch(self, batch)

    monkeypatch.setattr(Engine, "forward_batch", broken)


def _positions_off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def shift(batch: Any) -> None:
        if batch.is_decode:
            batch.positions = batch.positions + 1

    _corrupt_batches(monkeypatch, shift)


def _positions_from_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """新 token 的位置从 0 数起、忘了加上已经缓存的长度：decode 的每一步都成了位置 0。"""

    def restart(batch: Any) -> None:
        if batch.is_decode:
            batch.positions = torch.zeros_like(batch.positions)

    _corrupt_batches(monkeypatch, restart)


def _kv_into_another_request(monkeypatch: pytest.MonkeyPatch) -> None:
    def swap(batch: Any) -> None:
        if batch.is_decode and len(batch.reqs) > 1:
            batch.out_loc = batch.out_loc.roll(1)

    _corrupt_batches(monkeypatch, swap)


def _skip_rope(monkeypatch: pytest.MonkeyPatch) -> None:
    """转角全是 0（cos = 1、sin = 0）：注意力层不管分开算还是用合并的算子，cos/sin 表都从
    ``table_on`` 来，两条路都等于没做 RoPE。"""
    from minisgl.layers.rotary import RotaryEmbedding

    original = RotaryEmbedding.table_on

    def no_rotation(self: RotaryEmbedding, device: torch.device) -> torch.Tensor:
        table = original(self, device)
        half = table.shape[-1] // 2
        return torch.cat([torch.ones_like(table[:, :half]), torch.zeros_like(table[:, half:])], -1)

    monkeypatch.setattr(RotaryEmbedding, "table_on", no_rotation)


INTACT_FLOOR = 0.95  # 完好的引擎至少答对这么多
COLLAPSED = 0.5

# 弄坏的方式 → 准确率必须低于的值。位置只差一时，模型靠相对位置还能蒙对大半（CPU 上量得约八成），
# 但已经低于完好的引擎的下限：和全对的表一比就看得出来
BREAKAGES: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], float]] = {
    "decode 的位置从 0 数起": (_positions_from_zero, COLLAPSED),
    "K/V 写进别的请求的槽位": (_kv_into_another_request, COLLAPSED),
    "跳过 RoPE": (_skip_rope, COLLAPSED),
    "decode 的位置差一": (_positions_off_by_one, INTACT_FLOOR),
}


@pytest.fixture
def llm_factory() -> Iterator[Callable[[], Any]]:
    from minisgl.llm import LLM

    created: list[Any] = []

    def make() -> Any:
        llm = LLM(
            MODEL,
            device="cpu",
            dtype=torch.float32,
            num_pages=2048,
            max_running_reqs=16,
            max_seq_len=256,
        )
        created.append(llm)
        return llm

    yield make
    for llm in created:
        llm.shutdown()


@pytest.fixture(scope="module")
def oracle_examples() -> list[Example]:
    return [ex for task in ORACLE_TASKS for ex in make_examples(20261203, task, 8)]


def test_the_intact_engine_answers(
    llm_factory: Callable[[], Any], oracle_examples: list[Example]
) -> None:
    assert _accuracy(llm_factory(), oracle_examples) >= INTACT_FLOOR


@pytest.mark.parametrize("name", list(BREAKAGES))
def test_a_broken_engine_gives_wrong_answers(
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    llm_factory: Callable[[], Any],
    oracle_examples: list[Example],
) -> None:
    breakage, ceiling = BREAKAGES[name]
    breakage(monkeypatch)
    accuracy = _accuracy(llm_factory(), oracle_examples)
    assert accuracy < ceiling, f"{name}: 引擎坏了，准确率却还有 {accuracy:.0%}"


def test_limit_probes_straddle_the_curriculum() -> None:
    """``chat_quality.py --limits`` 的题：确定、标准答案对，“超出课程”的组确实超出了。"""
    import re

    groups = chat_quality.limit_probes(5)
    assert groups == chat_quality.limit_probes(5)
    for name, group in groups.items():
        assert len(group) == 40, name
        for ex in group:
            numbers = [int(n) for n in re.findall(r"\d+", ex.prompt)]
            if ex.task == "add_sub":
                assert int(ex.expected) == sum(numbers)
                digits = {len(str(n)) for n in numbers}
                beyond = "超出课程" in name
                assert digits <= ({5, 6} if beyond else {int(re.findall(r"\d", name)[0])})
            elif ex.task in ("sort", "reverse"):
                want = sorted(numbers) if ex.task == "sort" else numbers[::-1]
                assert ex.expected.split() == [str(n) for n in want]
                assert (len(numbers) > 8) == ("超出课程" in name)
            else:
                assert ex.prompt.endswith(ex.expected)
                assert (len(ex.expected.split()) > 8) == ("超出课程" in name)
            assert score(
                ex, f"{ex.prompt} = {ex.expected}" if ex.task == "add_sub" else ex.expected
            )
