"""第 7 章：Engine。按内存预算算页数的算术；Engine 贪心生成的 token 和第 5 章的
``greedy_generate`` 逐个相同；同一个种子的采样生成可以复现。"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import minisgl.engine.engine as engine_module
from minisgl.core import SamplingParams
from minisgl.engine import Engine, EngineConfig, kv_bytes_per_page, plan_num_pages, static_generate
from minisgl.models import load_model

GiB = 1 << 30
PROMPTS = [[1, 2, 3, 4, 5, 6, 7], [100, 200, 300], [42] * 11]


def _config(model: Path, **kw: object) -> EngineConfig:
    base: dict[str, object] = dict(
        device="cpu", dtype=torch.float32, page_size=4, max_running_reqs=4, max_seq_len=64
    )
    base.update(kw)
    return EngineConfig(model, **base)  # type: ignore[arg-type]


def test_bytes_per_page() -> None:
    # K 和 V × 2 层 × 4 个 token × 2 个 KV 头 × head_dim 32 × 4 字节
    assert kv_bytes_per_page(2, 2, 32, 4, torch.float32) == 2 * 2 * 4 * 2 * 32 * 4
    assert kv_bytes_per_page(28, 8, 128, 1, torch.bfloat16) == 2 * 28 * 8 * 128 * 2


def test_plan_num_pages_arithmetic() -> None:
    per_page = 1 << 20  # 1 MiB 一页
    # 总 80 GiB、加载模型后空闲 70 GiB、fraction 0.9：留出 8 GiB，KV 池拿 62 GiB
    plan = plan_num_pages(
        free=70 * GiB, total=80 * GiB, bytes_per_page=per_page, memory_fraction=0.9
    )
    assert plan.source == "memory_fraction" and plan.available == 62 * GiB
    assert plan.num_pages == 62 * 1024 and not plan.capped
    # 明确的预算：不超过空闲量
    plan = plan_num_pages(
        free=70 * GiB,
        total=80 * GiB,
        bytes_per_page=per_page,
        memory_fraction=0.9,
        memory_budget=3 * GiB + 5,
    )
    assert (plan.source, plan.num_pages) == ("memory_budget", 3 * 1024)
    plan = plan_num_pages(
        free=1 * GiB,
        total=80 * GiB,
        bytes_per_page=per_page,
        memory_fraction=0.9,
        memory_budget=3 * GiB,
    )
    assert plan.num_pages == 1024
    # 页数直接给：优先级最高，不看内存
    plan = plan_num_pages(
        free=0, total=0, bytes_per_page=per_page, memory_fraction=0.9, num_pages=7
    )
    assert (plan.source, plan.num_pages) == ("num_pages", 7)
    # 页表用不到的页不开
    plan = plan_num_pages(
        free=70 * GiB,
        total=80 * GiB,
        bytes_per_page=per_page,
        memory_fraction=0.9,
        max_useful_pages=100,
    )
    assert plan.num_pages == 100 and plan.capped
    # 不够一页：清楚地报错，而不是建一个空池子
    with pytest.raises(RuntimeError, match="not enough memory"):
        plan_num_pages(free=5 * GiB, total=80 * GiB, bytes_per_page=per_page, memory_fraction=0.9)


def test_engine_sizes_pool_from_mocked_memory(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 假装设备总共 1 GiB、空闲 10 MiB + 0.1 GiB 的余量：KV 池应该正好拿到 10 MiB
    total = GiB
    free = 10 * (1 << 20) + int(0.1 * GiB) + 1
    monkeypatch.setattr(engine_module, "memory_info", lambda device: (free, total))
    cfg = _config(tiny_model, max_running_reqs=200, max_seq_len=64, memory_fraction=0.9)
    engine = Engine(cfg)
    try:
        per_page = kv_bytes_per_page(2, 2, 32, 4, torch.float32)
        assert engine.memory_plan.bytes_per_page == per_page
        assert engine.num_pages == 10 * (1 << 20) // per_page == 2560
        assert not engine.memory_plan.capped  # 页表 200 行 × 16 页，用得到 3200 页
        assert engine.kv_cache.num_pages == engine.num_pages + 1  # 加一页哑页
    finally:
        engine.shutdown()


def test_engine_explicit_budget_and_override(tiny_model: Path) -> None:
    per_page = kv_bytes_per_page(2, 2, 32, 4, torch.float32)
    engine = Engine(_config(tiny_model, memory_budget=10 * per_page + 1))
    assert engine.num_pages == 10 and engine.memory_plan.source == "memory_budget"
    engine.shutdown()
    engine = Engine(_config(tiny_model, num_pages=13))
    assert engine.num_pages == 13 and engine.memory_plan.source == "num_pages"
    engine.shutdown()


def test_engine_greedy_matches_greedy_generate(tiny_model: Path) -> None:
    from minisgl.models import generate_in_new_context

    model = load_model(tiny_model, device="cpu", dtype=torch.float32)
    expected = generate_in_new_context(model, PROMPTS, 8).token_ids
    engine = Engine(_config(tiny_model))
    try:
        assert engine.graph_runner.enabled is False  # CPU 上 CUDA Graph 关闭，走即时执行
        assert static_generate(engine, PROMPTS, 8) == expected
    finally:
        engine.shutdown()


def test_engine_sampling_is_reproducible(tiny_model: Path) -> None:
    params = [
        SamplingParams(temperature=1.0, top_k=50),
        SamplingParams(),
        SamplingParams(temperature=0.8, top_p=0.9),
    ]
    runs = []
    for seed in (123, 123, 321):
        engine = Engine(_config(tiny_model, seed=seed))
        runs.append(static_generate(engine, PROMPTS, 10, params))
        engine.shutdown()
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    greedy = Engine(_config(tiny_model))
    expected = static_generate(greedy, PROMPTS, 10)
    greedy.shutdown()
    assert runs[0][1] == runs[2][1] == expected[1]  # 贪心的请求不受种子和邻居影响


def test_cpu_budget_from_environment(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU 上设置了 MINISGL_CPU_MEMORY_BUDGET：总量就是预算，可用量是预算减去本进程已占用的，
    KV 池只能拿其中留出 (1 - fraction) 之后的部分。预算比已占用的还少时清楚地报错。"""
    import psutil

    rss = psutil.Process().memory_info().rss
    budget = rss + 64 * (1 << 20)  # 比现在多 64 MiB
    monkeypatch.setenv("MINISGL_CPU_MEMORY_BUDGET", str(budget))
    engine = Engine(_config(tiny_model, max_running_reqs=4096, max_seq_len=64, memory_fraction=1.0))
    try:
        plan = engine.memory_plan
        assert plan.source == "memory_fraction" and not plan.capped
        assert 0 < plan.available <= 64 * (1 << 20)  # 权重和别的分配已经从 64 MiB 里扣掉
        assert plan.num_pages == plan.available // plan.bytes_per_page
    finally:
        engine.shutdown()
    monkeypatch.setenv("MINISGL_CPU_MEMORY_BUDGET", str(rss // 2))
    with pytest.raises(RuntimeError, match="not enough memory"):
        Engine(_config(tiny_model))
