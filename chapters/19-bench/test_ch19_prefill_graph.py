"""第 19 章：按 token 数分档录下的 prefill CUDA Graph，和它要的补齐（请求、token、工作表）。

图只在 CUDA 上录；CPU 上的孪生测试走同一段代码（静态张量、补齐的 token 和请求、补齐的工作表），
只是即时执行，kernel 由 Triton 的解释器跑。
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from minisgl.attention import TRITON_AVAILABLE, TritonAttnBackend, page_slots, prepare_batch
from minisgl.core import Batch, Req, SamplingParams
from minisgl.engine import Engine, EngineConfig
from minisgl.engine.prefill_graph import PrefillGraphRunner, prefill_graph_token_counts
from minisgl.kvcache import MHAKVCache
from minisgl.llm import LLM
from minisgl.scheduler.config import SchedulerConfig
from minisgl.utils import cuda_graph_available
from minisgl.utils.device import pick_device

pytestmark = pytest.mark.skipif(not TRITON_AVAILABLE, reason="triton is not installed")
# 录图的测试看测试用的设备，不看机器有没有 GPU：GPU 机器上设了 MINISGL_DEVICE=cpu 时 Triton 是
# 解释执行的，跑不了 CUDA 张量上只为编译准备的分支（libdevice）
ON_CUDA = cuda_graph_available(pick_device())


def _backend(rows: int = 4) -> TritonAttnBackend:
    kv = MHAKVCache(1, 2, 16, num_pages=64, page_size=1, dtype=torch.float32, device="cpu")
    return TritonAttnBackend(kv, torch.zeros(rows, 32, dtype=torch.int32))


def test_host_metadata_pads_requests_and_work_items() -> None:
    from minisgl.attention.triton_attn import IDLE_BLOCK

    backend = _backend()
    reqs = [Req(torch.arange(40, dtype=torch.int32), table_idx=2, cached_len=30)]  # 10 个新 token
    rows, cu, cached, kv_lens, work = backend.host_metadata(reqs, num_reqs=3, num_blocks=4)
    assert (rows, cu, cached, kv_lens) == ([2, 0, 0], [0, 10, 10, 10], [30, 0, 0], [40, 1, 1])
    assert work == [0, 0] + [0, IDLE_BLOCK] * 3  # 补出来的请求没有新 token，工作项什么也不做
    with pytest.raises(ValueError, match="requests do not fit"):
        backend.host_metadata(reqs * 4, num_reqs=3)
    with pytest.raises(ValueError, match="q blocks do not fit"):
        backend.host_metadata(reqs * 2, num_blocks=1)


def test_prefill_graph_token_counts() -> None:
    assert prefill_graph_token_counts(16384) == (512, 1024, 2048, *range(4096, 16385, 2048))
    assert prefill_graph_token_counts(8192) == (512, 1024, 2048, 4096, 6144, 8192)
    assert prefill_graph_token_counts(5000) == (512, 1024, 2048, 4096, 5000)
    assert prefill_graph_token_counts(300) == (300,)
    assert prefill_graph_token_counts(0) == ()


def test_scheduler_records_prefill_graphs_up_to_its_step_budget(tiny_model: Path) -> None:
    assert SchedulerConfig(tiny_model, max_extend_tokens=4096).cuda_graph_prefill_tokens == 4096
    config = SchedulerConfig(tiny_model, max_extend_tokens=4096, cuda_graph_prefill_tokens=0)
    assert config.cuda_graph_prefill_tokens == 0
    assert EngineConfig(tiny_model).cuda_graph_prefill_tokens is None  # 单独用 Engine：不录
    with pytest.raises(ValueError, match="cuda_graph_prefill_tokens"):
        SchedulerConfig(tiny_model, cuda_graph_prefill_tokens=-1)


def test_server_flag_for_prefill_graphs() -> None:
    from minisgl.server import parse_args

    default = parse_args(["--model", "m", "--max-extend-tokens", "2048"])
    assert default.cuda_graph_prefill_tokens == 2048
    assert (
        parse_args(["--model", "m", "--cuda-graph-prefill-tokens", "0"]).cuda_graph_prefill_tokens
        == 0
    )
    with pytest.raises(SystemExit):  # argparse 式的报错，不是 traceback
        parse_args(["--model", "m", "--cuda-graph-prefill-tokens", "-5"])


def _engine(tiny_model: Path, device: str, **overrides: object) -> Engine:
    return Engine(
        EngineConfig(
            tiny_model, device=device, dtype=torch.float32, attention_backend="triton",
            page_size=4, max_running_reqs=4, max_seq_len=64, **overrides,  # type: ignore[arg-type]
        )
    )  # fmt: skip


def _prefix_batch(engine: Engine) -> Batch:
    """两个请求：一个全新的提示，一个前 12 个 token 的 K/V 已经在池子里（先单独 prefill 过）。
    返回已经 prepare_batch、还没算元数据的 prefill 批次。"""
    a = Req(torch.arange(3, 24, dtype=torch.int32), table_idx=0, output_len=2)
    b = Req(torch.arange(40, 49, dtype=torch.int32), table_idx=1, output_len=2)
    for i in range(2):
        engine.page_table[i, :32] = page_slots(range(8 * i, 8 * i + 8), engine.page_size, 32)
    prefix = Req(a.input_ids[:12], table_idx=0, output_len=1)
    engine.forward_batch(prepare_batch(Batch([prefix], "prefill"), engine.page_table))
    a.cached_len = 12
    return prepare_batch(Batch([a, b], "prefill"), engine.page_table)


def _tolerance(device: torch.device) -> float:
    """补齐前后 GEMM 的行数不同：CPU 上逐位相近，GPU 上 cuBLAS 可能换一种算法，留宽一点。"""
    return 1e-5 if device.type == "cpu" else 1e-4


def test_padded_prefill_path_matches_eager(tiny_model: Path) -> None:
    """孪生测试（CPU 上也跑）：和图里录的是同一段代码，只是即时执行。9 + 9 个新 token 补到
    32 个、2 个请求补到 4 个；补出来的 token 只写哑页。"""
    engine = _engine(tiny_model, str(pick_device()))  # GPU 机器上 Triton 不能跑 CPU 张量
    try:
        batch = _prefix_batch(engine)
        runner = PrefillGraphRunner(
            engine.model, engine.ctx, token_counts=(), device=engine.device,
            dummy_page=engine.dummy_page,
        )  # fmt: skip
        assert not runner.enabled and not runner.can_run(batch)  # 没有档位就不录
        runner.token_counts = [32]  # 不录图，只在静态张量上即时执行这一档
        runner.allocate_static()
        runner.fill(batch, 32)
        padded = runner.run_static(32)
        assert padded.shape[0] == 4 and (runner.out_loc[18:32] == runner.dummy_slot).all()
        eager = engine.forward_logits(batch)  # 普通路径：重写同样的槽位、同样的值
        tol = _tolerance(engine.device)
        torch.testing.assert_close(padded[:2], eager, rtol=tol, atol=tol)
        assert padded[:2].argmax(-1).tolist() == eager.argmax(-1).tolist()
    finally:
        engine.shutdown()


@pytest.mark.skipif(not ON_CUDA, reason="需要 CUDA；CPU 孪生见上一个测试")
def test_prefill_graph_replay_equals_eager(tiny_model: Path) -> None:
    graphs = _engine(tiny_model, "cuda", cuda_graph_prefill_tokens=64)
    assert graphs.prefill_graphs.enabled and graphs.prefill_graphs.token_counts == [64]
    try:
        batch = _prefix_batch(graphs)
        assert graphs.prefill_graphs.can_run(batch)
        replayed = graphs.forward_logits(batch).clone()
        graphs.prefill_graphs.enabled = False  # 同一个引擎、同一批，再即时算一次
        eager = graphs.forward_logits(batch)
        torch.testing.assert_close(replayed, eager, rtol=1e-4, atol=1e-4)
        assert replayed.argmax(-1).tolist() == eager.argmax(-1).tolist()
    finally:
        graphs.shutdown()


class _EagerGraph:
    """CPU 上代替录好的图：``replay`` 在静态张量上即时跑一遍这一档，写进同一块输出。"""

    def __init__(self, runner: PrefillGraphRunner, num_tokens: int, out: torch.Tensor) -> None:
        self.runner, self.num_tokens, self.out = runner, num_tokens, out

    def replay(self) -> None:
        self.out.copy_(self.runner.run_static(self.num_tokens))


# 一步：(每个请求的 uid、前缀、新 token 数, logits)
Step = tuple[list[tuple[int, int, int]], torch.Tensor]


def _prefill_logits(llm: LLM, prompts: list[list[int]]) -> list[Step]:
    """只做 prefill（每个请求生成 1 个 token），记下每一步的请求和 logits。"""
    engine = llm.scheduler.engine
    steps: list[Step] = []
    forward = engine.forward_logits

    def recording(batch: Batch) -> torch.Tensor:
        logits = forward(batch)
        steps.append(([(r.uid, r.cached_len, r.extend_len) for r in batch.reqs], logits.clone()))
        return logits

    engine.forward_logits = recording  # type: ignore[method-assign]
    llm.generate(prompts, SamplingParams(max_tokens=1, ignore_eos=True))
    return steps


def test_llm_prefill_through_the_padded_path(tiny_model: Path, make_llm) -> None:  # type: ignore[no-untyped-def]
    """孪生测试（CPU 上也跑），走整条路径：调度器分块（一步最多 64 个 token）、前缀命中、一步里
    长短不一的请求，每一步都经过 ``can_run``、``fill``、``replay``（只是"图"换成即时执行），
    每一步的 logits 都和普通路径的一致。"""
    prompts = [list(range(5, 5 + n)) for n in (3, 40, 17, 90)] + [list(range(5, 60))]
    config = dict(attention_backend="triton", max_extend_tokens=64, cuda_graph_prefill_tokens=0)
    want = _prefill_logits(make_llm(tiny_model, **config), prompts)
    llm = make_llm(tiny_model, **config)
    runner = llm.scheduler.engine.prefill_graphs
    assert not runner.enabled  # 一档也不录：手工打开，每一档配一个即时执行的"图"
    runner.token_counts = [16, 32, 64]
    runner.allocate_static()
    runner.graphs = {
        n: (_EagerGraph(runner, n, out), out)  # type: ignore[misc]
        for n in runner.token_counts
        for out in [runner.run_static(n).clone()]
    }
    runner.enabled = True
    got = _prefill_logits(llm, prompts)
    assert [reqs for reqs, _ in got] == [reqs for reqs, _ in want]
    cached = [c for reqs, _ in got for _, c, _ in reqs]
    assert len(got) >= 3 and any(cached)  # 有分块（接着前一块算），有前缀命中
    tol = _tolerance(llm.scheduler.engine.device)
    for (_, a), (_, b) in zip(got, want):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
