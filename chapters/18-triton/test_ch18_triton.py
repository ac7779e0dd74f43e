"""第 18 章：Triton 分页注意力。

设备和包里的选法相同（``MINISGL_DEVICE`` > cuda > mps > cpu）。不在 CUDA 上时 kernel 由 Triton 的
解释器在 CPU 上执行（同一段 kernel 代码），CI 里测的就是它；在 GPU 机器上，同样的断言在编译后的
kernel 上再跑一遍，外加 bfloat16。

- extend（带缓存前缀、长短不一的一批）和 decode（split-K，含空的段）与一个逐请求的稠密参照相比；
  页大小 1、4、16，GQA 分组 1、2、4，输出缓冲区事先填满 nan，漏写的位置会露馅；
- 元数据：前缀和、行号、长度；CUDA Graph 的三个钩子（补齐的假请求只读 1 个槽位）；
- ``auto`` 的选择；整个引擎上 torch 和 triton 两个后端的贪心 token 完全相同（float32），
  包括分块预填充和前缀缓存命中。
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from minisgl.utils.device import pick_device

DEVICE = str(pick_device())
DTYPES = [torch.float32] + ([torch.bfloat16] if DEVICE.startswith("cuda") else [])
TOL = {torch.float32: 2e-5, torch.bfloat16: 3e-2}

from minisgl.attention import TRITON_AVAILABLE  # noqa: E402 —— 它先打开解释器，再导入 triton

if not TRITON_AVAILABLE:  # dev 依赖里有 triton（Linux）；没有 wheel 的平台（macOS）整个文件跳过
    pytest.skip("triton is not installed", allow_module_level=True)


def random_pool(gen: torch.Generator, num_slots: int, hkv: int, d: int, dtype: torch.dtype):
    k = torch.randn(num_slots, hkv, d, generator=gen).to(DEVICE, dtype)
    v = torch.randn(num_slots, hkv, d, generator=gen).to(DEVICE, dtype)
    return k, v


def random_page_table(
    gen: torch.Generator, rows: int, columns: int, page_size: int
) -> torch.Tensor:
    """每行随机挑页（页内连续），和分配器给出的页表一样：槽位 = 页号 × 页大小 + 页内偏移。"""
    pages_per_row = columns // page_size
    pages = torch.randperm(rows * pages_per_row, generator=gen)
    table = torch.empty(rows, columns, dtype=torch.int32)
    for r in range(rows):
        mine = pages[r * pages_per_row : (r + 1) * pages_per_row]
        table[r] = (mine[:, None] * page_size + torch.arange(page_size)).flatten()
    return table


def reference(q, k_pool, v_pool, table, rows, cu_q, cached) -> torch.Tensor:
    """逐请求的稠密注意力（float32）：位置 cached + j 的 q 看位置 0..cached + j 的 K/V。"""
    out = torch.empty(q.shape, dtype=torch.float32)
    q, k_pool, v_pool = q.float().cpu(), k_pool.float().cpu(), v_pool.float().cpu()
    for i in range(len(rows)):
        a, b, c = int(cu_q[i]), int(cu_q[i + 1]), int(cached[i])
        slots = table[int(rows[i]), : c + b - a].long()
        group = q.shape[1] // k_pool.shape[1]
        k = k_pool[slots].repeat_interleave(group, 1)
        v = v_pool[slots].repeat_interleave(group, 1)
        s = torch.einsum("thd,shd->hts", q[a:b], k) / math.sqrt(q.shape[-1])
        visible = torch.arange(c + b - a)[None, :] <= (c + torch.arange(b - a))[:, None]
        s = s.masked_fill(~visible[None], float("-inf"))
        out[a:b] = torch.einsum("hts,shd->thd", s.softmax(-1), v)
    return out


SHAPES = [(8, 2, 32), (4, 4, 16), (16, 4, 64)]  # (q 头数, kv 头数, head_dim)：分组 4、1、4


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize(("hq", "hkv", "d"), SHAPES)
def test_extend_matches_reference(dtype: torch.dtype, page_size: int, hq: int, hkv: int, d: int):
    from minisgl.attention.triton_attn import extend_attention, extend_tiles, extend_work

    gen = torch.Generator().manual_seed(page_size * 100 + hq)
    columns, num_rows = 256, 6
    table = random_page_table(gen, num_rows, columns, page_size)
    k_pool, v_pool = random_pool(gen, num_rows * columns, hkv, d, dtype)
    # 一批 4 个：没有前缀的 prefill、带长前缀的 extend、只有 1 个新 token、比一块 q 还长的
    cached = torch.tensor([0, 150, 37, 5], dtype=torch.int32)
    extend = torch.tensor([45, 20, 1, 70], dtype=torch.int32)
    rows = torch.tensor([3, 0, 5, 1], dtype=torch.int32)
    cu = torch.zeros(5, dtype=torch.int32)
    cu[1:] = extend.cumsum(0)
    q = torch.randn(int(cu[-1]), hq, d, generator=gen).to(DEVICE, dtype)
    out = torch.full_like(q, float("nan"))
    dev = [x.to(DEVICE) for x in (table, rows, cu, cached)]
    block_m = extend_tiles(q.device, dtype)["BLOCK_M"]
    work = torch.tensor(extend_work(extend.tolist(), cached.tolist(), block_m), dtype=torch.int32)
    extend_attention(q, k_pool, v_pool, *dev, work.view(-1, 2).to(DEVICE), out=out)
    want = reference(q, k_pool, v_pool, table, rows, cu, cached)
    assert not out.isnan().any()
    assert (out.float().cpu() - want).abs().max() < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize(("hq", "hkv", "d"), SHAPES)
def test_decode_matches_reference(dtype: torch.dtype, page_size: int, hq: int, hkv: int, d: int):
    """长度 1（7 段都是空的）、短于一段、刚好跨段、很长：split-K 的合并都要对。"""
    from minisgl.attention.triton_attn import decode_attention

    gen = torch.Generator().manual_seed(page_size + hq)
    columns, num_rows = 512, 5
    table = random_page_table(gen, num_rows, columns, page_size)
    k_pool, v_pool = random_pool(gen, num_rows * columns, hkv, d, dtype)
    lens = torch.tensor([1, 20, 257, 500, 33], dtype=torch.int32)
    rows = torch.tensor([4, 2, 0, 1, 3], dtype=torch.int32)
    q = torch.randn(len(lens), hq, d, generator=gen).to(DEVICE, dtype)
    out = torch.full_like(q, float("nan"))
    dev = [x.to(DEVICE) for x in (table, rows, lens)]
    decode_attention(q, k_pool, v_pool, *dev, out=out)
    cu = torch.arange(len(lens) + 1, dtype=torch.int32)
    want = reference(q, k_pool, v_pool, table, rows, cu, lens - 1)
    assert not out.isnan().any()
    assert (out.float().cpu() - want).abs().max() < TOL[dtype]


# ---------------------------------------------------------------- 元数据与 CUDA Graph 钩子


def make_backend(num_rows: int = 4, columns: int = 64) -> Any:
    from minisgl.attention import TritonAttnBackend
    from minisgl.kvcache import MHAKVCache

    kv = MHAKVCache(1, 2, 16, num_pages=256, page_size=1, dtype=torch.float32, device=DEVICE)
    table = torch.arange(num_rows * columns, dtype=torch.int32, device=DEVICE).view(num_rows, -1)
    return TritonAttnBackend(kv, table)


def test_extend_work_puts_the_heaviest_blocks_first() -> None:
    """一项是 (请求, q 块)；按这一块要扫的 K/V 长度（前缀 + 到这一块末尾的新 token）从长到短。"""
    from minisgl.attention.triton_attn import extend_work

    # 请求 0：70 个新 token、没有前缀，三块分别扫 32、64、70；请求 1：5 个新 token、前缀 100，扫 105
    assert extend_work([70, 5], [0, 100], 32) == [1, 0, 0, 2, 0, 1, 0, 0]
    assert extend_work([1, 1], [3, 9], 64) == [1, 0, 0, 0]
    assert extend_work([], [], 32) == []


def test_prepare_metadata_for_a_mixed_batch() -> None:
    from minisgl.core import Batch, Req

    backend = make_backend()
    reqs = [
        Req(torch.arange(10, dtype=torch.int32), table_idx=2, cached_len=4),  # 6 个新 token
        Req(torch.arange(3, dtype=torch.int32), table_idx=0),  # 3 个
    ]
    batch = Batch(reqs, "prefill")
    backend.prepare_metadata(batch)
    meta = batch.attn_metadata
    assert meta.rows.tolist() == [2, 0] and meta.cu_q.tolist() == [0, 6, 9]
    assert meta.cached.tolist() == [4, 0] and meta.kv_lens.tolist() == [10, 3]
    # 工作表：一块 q 32 行，两个请求各一块；请求 0 这一块要扫 10 个 K/V，请求 1 的 3 个，重的在前
    assert meta.work.tolist() == [[0, 0], [1, 0]] and not meta.is_decode
    assert meta.get_last_indices(2).tolist() == [5, 8]


@pytest.mark.parametrize("bs", [1, 2, 3, 5, 6])
def test_metadata_tensors_start_16_byte_aligned(bs: int) -> None:
    """四个元数据张量切自同一块，但每个都从 16 字节对齐的地址开始：Triton 按指针是否对齐
    各编译一份 kernel，紧挨着切的话批大小模 4 一变，extend、decode 的 kernel 就要现编译。"""
    from minisgl.core import Batch, Req

    backend = make_backend(num_rows=8)
    reqs = [Req(torch.arange(5, dtype=torch.int32), table_idx=i, cached_len=4) for i in range(bs)]
    batch = Batch(reqs, "decode")
    backend.prepare_metadata(batch)
    meta = batch.attn_metadata
    tensors = (meta.rows, meta.cu_q, meta.cached, meta.kv_lens)
    assert [t.data_ptr() % 16 for t in tensors] == [0, 0, 0, 0]
    assert meta.cu_q.tolist() == list(range(bs + 1)) and meta.kv_lens.tolist() == [5] * bs
    assert meta.is_decode


def test_graph_hooks_pad_with_one_slot_requests() -> None:
    from minisgl.core import Batch, Req

    backend = make_backend()
    meta = backend.make_graph_metadata(8)
    backend.reset_graph_metadata(meta, 8, dummy_slot=0)
    assert meta.kv_lens.tolist() == [1] * 8 and meta.is_decode
    # decode：每个请求只有最后 1 个 token 是新的
    reqs = [
        Req(torch.arange(n, dtype=torch.int32), table_idx=i, cached_len=n - 1)
        for i, n in [(3, 7), (1, 2)]
    ]
    batch = Batch(reqs, "decode")
    # 引擎里 positions 在重放之前就填好了（prepare_batch 或调度器）：长度由它加 1 得到
    batch.positions = torch.tensor([6, 1], dtype=torch.int32, device=backend.page_table.device)
    backend.fill_graph_metadata(meta, batch, padded_bs=4, dummy_slot=0)
    assert meta.rows[:4].tolist() == [3, 1, 0, 0]
    assert meta.kv_lens[:4].tolist() == [7, 2, 1, 1]  # 补齐的两行：第 0 行的 1 个槽位
    assert meta.get_last_indices(4).tolist() == [0, 1, 2, 3]


def test_auto_picks_triton_only_on_cuda(tiny_model: Path) -> None:
    from minisgl.attention import (
        NativeAttnBackend,
        TritonAttnBackend,
        create_attention_backend,
    )
    from minisgl.kvcache import MHAKVCache
    from minisgl.models.config import ModelConfig

    config = ModelConfig.from_pretrained(tiny_model)
    kv = MHAKVCache(1, 2, 16, num_pages=8, page_size=1, dtype=torch.float32, device="cpu")
    table = torch.zeros(2, 8, dtype=torch.int32)
    assert isinstance(create_attention_backend("auto", config, kv, table), NativeAttnBackend)
    assert isinstance(create_attention_backend("triton", config, kv, table), TritonAttnBackend)


def test_interpreter_index_backport(monkeypatch: pytest.MonkeyPatch) -> None:
    """旧版解释器给 ``tl.tensor`` 的 ``__index__`` 是 ``int(数组)``，NumPy 2.4 起形状 ``(1,)`` 的
    数组不能这样转；补过之后它们也能当 ``range`` 的边界。补丁只包一层，调用几次都一样。"""
    import operator
    from types import SimpleNamespace

    import numpy as np
    from triton.runtime import interpreter

    from minisgl.utils import device

    def old_patch(tensor: type, *scope: object) -> None:
        tensor.__index__ = lambda self: int(self.handle.data)  # type: ignore[attr-defined]

    monkeypatch.setattr(interpreter, "_patch_lang_tensor", old_patch)
    device._backport_interpreter_index()
    patched = interpreter._patch_lang_tensor
    assert patched is not old_patch
    device._backport_interpreter_index()
    assert interpreter._patch_lang_tensor is patched

    class Scalar:
        handle = SimpleNamespace(data=np.array([5], dtype=np.int32))

    patched(Scalar)
    assert operator.index(Scalar()) == 5
    assert list(range(0, Scalar(), 2)) == [0, 2, 4]


# ---------------------------------------------------------------- 整个引擎


def test_engine_tokens_identical_to_native_backend(tiny_model: Path, make_llm: Any) -> None:
    """float32、贪心：两个后端生成的 token 逐个相同。提示共享前缀（第二轮命中前缀缓存，
    走带前缀的 extend），块预算 16 让长提示分块预填充。"""
    from minisgl.core import SamplingParams

    prefix = list(range(1000, 1040))
    prompts = [prefix + [7, 8, 9], prefix + [11] * 5, list(range(200, 203)), [5] * 60]
    params = SamplingParams(max_tokens=10, ignore_eos=True)
    results = {}
    for backend in ("torch", "triton"):
        llm = make_llm(tiny_model, attention_backend=backend, max_extend_tokens=16)
        first = [o.token_ids for o in llm.generate(prompts, params)]
        again = [o.token_ids for o in llm.generate(prompts, params)]  # 这一轮前缀全部命中
        assert first == again
        results[backend] = first
    assert results["torch"] == results["triton"]
