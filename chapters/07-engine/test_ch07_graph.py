"""第 7 章：CUDA Graph。补齐的算术；CPU 上 GraphRunner 干净地关闭；前向里要同步主机的模型
（MoE 的 torch 后端）不录，留下原因；图里用的"整批一次算"的 decode 路径（含补齐出来的假请求）
在 CPU 上即时运行，结果和普通路径相同；有 CUDA 时，重放和即时执行生成同样的 token、同样的
logits，MoE 模型在 CUDA 上照常建好、生成。"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from minisgl.attention import prepare_batch
from minisgl.core import Batch, Req
from minisgl.engine import Engine, EngineConfig, graph, padded_batch_size, static_generate
from minisgl.utils import cuda_graph_available, pick_device

PROMPTS = [[1, 2, 3, 4, 5, 6, 7], [100, 200, 300], [42] * 11]
# 只在 CUDA 上的测试看测试用的设备，不看机器有没有 GPU：GPU 机器上设了 MINISGL_DEVICE=cpu，
# 就只测 CPU（这时跳过的测试，CPU 上都有孪生）
ON_CUDA = cuda_graph_available(pick_device())


def test_padded_batch_size() -> None:
    sizes = [1, 2, 4, 8, 16]
    assert [padded_batch_size(b, sizes) for b in (1, 2, 3, 4, 5, 8, 9, 16)] == [
        1,
        2,
        4,
        4,
        8,
        8,
        16,
        16,
    ]
    assert padded_batch_size(17, sizes) is None  # 比最大一档还大：即时执行
    with pytest.raises(ValueError):
        padded_batch_size(0, sizes)


def test_config_sorts_batch_sizes(tiny_model: Path) -> None:
    cfg = EngineConfig(tiny_model, cuda_graph_batch_sizes=(8, 1, 4, 4, 2))
    assert cfg.cuda_graph_batch_sizes == (1, 2, 4, 8)


def test_runner_is_disabled_on_cpu(tiny_model: Path) -> None:
    assert not cuda_graph_available("cpu")
    engine = Engine(EngineConfig(tiny_model, device="cpu", max_running_reqs=4, max_seq_len=64))
    try:
        runner = engine.graph_runner
        assert not runner.enabled and "cpu" in runner.describe()
        assert runner.graphs == {}
        batch = Batch([Req(torch.tensor([1]), table_idx=0)], "decode")
        assert not runner.can_run(batch)
        with pytest.raises(RuntimeError):
            runner.replay(batch)
    finally:
        engine.shutdown()


def test_models_that_sync_with_the_host_are_not_captured(
    models_dir: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MoE 的 torch 后端在前向里 ``counts.tolist()``：录制时这一步会让捕获失败，Engine 就建不起来。
    GraphRunner 在捕获之前认出这样的层，关掉并说明原因。CPU 上假装图可用，走到这一项检查为止。"""
    moe = Engine(EngineConfig(models_dir / "tiny-qwen3-moe", device="cpu", max_seq_len=64))
    dense = Engine(EngineConfig(tiny_model, device="cpu", max_seq_len=64))
    try:
        synced = graph.host_synced_layers(moe.model)
        assert synced == [f"model.layers.{i}.mlp.experts" for i in range(len(synced))]
        assert len(synced) == moe.model.config.num_layers
        assert graph.host_synced_layers(dense.model) == []
        monkeypatch.setattr(graph, "cuda_graph_available", lambda device: True)
        runner = graph.GraphRunner(
            moe.model, moe.ctx, batch_sizes=(1, 2), device=moe.device, dummy_page=moe.dummy_page
        )
        assert not runner.enabled and runner.graphs == {}
        assert runner.describe() == (
            f"off ({len(synced)} layers sync with the host, e.g. model.layers.0.mlp.experts)"
        )
    finally:
        moe.shutdown()
        dense.shutdown()


def _decode_batch(engine: Engine) -> Batch:
    """prefill 三段提示，再造出它们的第一个 decode 批次（已 prepare_batch，还没算元数据）。"""
    from minisgl.attention import page_slots

    reqs, next_page = [], 0
    for i, p in enumerate(PROMPTS):
        req = Req(torch.tensor(p, dtype=torch.int32), table_idx=i, output_len=4, uid=i)
        n = -(-req.max_device_len // engine.page_size)
        slots = page_slots(range(next_page, next_page + n), engine.page_size, req.max_device_len)
        engine.page_table[i, : req.max_device_len] = slots
        next_page += n
        reqs.append(req)
    tokens = engine.forward_batch(prepare_batch(Batch(reqs, "prefill"), engine.page_table))
    for r, t in zip(reqs, tokens.tolist()):
        r.append_host(t)
        r.complete_one()
    return prepare_batch(Batch(reqs, "decode"), engine.page_table)


def test_padded_decode_path_matches_eager_on_cpu(tiny_model: Path) -> None:
    """CPU 上的孪生测试：和图里录的是同一段代码（静态张量 + 补齐 + 整批注意力），只是即时执行。"""
    engine = Engine(
        EngineConfig(tiny_model, device="cpu", page_size=4, max_running_reqs=8, max_seq_len=64)
    )
    try:
        batch = _decode_batch(engine)
        runner = engine.graph_runner
        runner.allocate_static(8)
        # 先走补齐路径：3 个真请求补到 4 个。假请求只写哑页，不会弄脏真请求的 K/V
        runner.fill(batch, 4)
        padded = runner.run_static(4)[: batch.size].clone()
        assert (runner.meta.slots[3] == runner.dummy_slot).all()
        eager = engine.forward_logits(batch)  # 普通路径，重写同样的槽位、同样的值
        # 两条路径的求和顺序不同（整行带掩码 vs 只取前 kv_len 个），只差浮点舍入
        torch.testing.assert_close(padded, eager, rtol=1e-4, atol=1e-4)
        assert padded.argmax(-1).tolist() == eager.argmax(-1).tolist()
    finally:
        engine.shutdown()


@pytest.mark.skipif(not ON_CUDA, reason="需要 CUDA；CPU 孪生见上一个测试")
def test_cuda_graph_replay_equals_eager(tiny_model: Path) -> None:
    def make(use_graph: bool) -> Engine:
        return Engine(
            EngineConfig(
                tiny_model,
                device="cuda",
                dtype=torch.float32,
                page_size=4,
                max_running_reqs=8,
                max_seq_len=64,
                use_cuda_graph=use_graph,
                cuda_graph_batch_sizes=(1, 2, 4, 8),
            )
        )

    eager = make(False)
    assert not eager.graph_runner.enabled
    expected = static_generate(eager, PROMPTS, 12)
    batch = _decode_batch(eager)
    eager_logits = eager.forward_logits(batch).clone()
    eager.shutdown()

    graph = make(True)
    try:
        runner = graph.graph_runner
        assert runner.enabled and sorted(runner.graphs) == [1, 2, 4, 8]
        assert static_generate(graph, PROMPTS, 12) == expected
        batch = _decode_batch(graph)
        assert runner.can_run(batch)  # 3 个请求补到 4
        replay_logits = graph.forward_logits(batch).clone()
        torch.testing.assert_close(replay_logits, eager_logits, rtol=1e-4, atol=1e-4)
    finally:
        graph.shutdown()


@pytest.mark.skipif(not ON_CUDA, reason="需要 CUDA；CPU 孪生见上面的 MoE 测试")
def test_moe_model_starts_and_generates_on_cuda(models_dir: Path) -> None:
    engine = Engine(
        EngineConfig(
            models_dir / "tiny-qwen3-moe", device="cuda", max_running_reqs=4, max_seq_len=64
        )
    )
    try:
        assert not engine.graph_runner.enabled
        assert "sync with the host" in engine.graph_runner.describe()
        out = static_generate(engine, PROMPTS, 4)
        assert [len(o) for o in out] == [4] * len(PROMPTS)
    finally:
        engine.shutdown()
