"""第 4 章：原生注意力后端——与逐头手算的稠密因果注意力对照（prefill、带前缀的 extend、decode、
长短不一的批次、GQA、页大小 1 与 4），以及 prepare_batch、get_last_indices 和后端登记表。"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from minisgl.attention import (
    SUPPORTED_ATTENTION_BACKENDS,
    NativeAttnBackend,
    NativeAttnMetadata,
    create_attention_backend,
    cu_seqlens,
    make_positions,
    page_slots,
    prepare_batch,
)
from minisgl.attention.native import extend_causal_mask
from minisgl.core import Batch, Req
from minisgl.kvcache import MHAKVCache
from minisgl.models.config import ModelConfig


def dense_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """一个序列从头到尾的因果注意力，逐个头、逐个 query 手算，float64。
    ``q``: ``(n, Hq, D)``；``k``、``v``: ``(n, Hkv, D)``。
    第 h 个 q 头用第 ``h // (Hq // Hkv)`` 个 KV 头。"""
    n, hq, d = q.shape
    group = hq // k.shape[1]
    q, k, v = q.double(), k.double(), v.double()
    out = torch.empty(n, hq, d, dtype=torch.float64)
    for h in range(hq):
        kh, vh = k[:, h // group], v[:, h // group]
        for i in range(n):
            scores = kh[: i + 1] @ q[i, h] / math.sqrt(d)  # 只看位置 0..i
            out[i, h] = torch.softmax(scores, dim=0) @ vh[: i + 1]
    return out


@dataclass
class Seq:
    """一个请求：全部 token 的 q/k/v，前 ``cached`` 个的 K/V 已经在池子里，这一步算 ``new`` 个。"""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cached: int
    new: int


def make_seqs(
    specs: list[tuple[int, int]], hq: int, hkv: int, d: int = 16, seed: int = 0
) -> list[Seq]:
    g = torch.Generator().manual_seed(seed)
    seqs = []
    for cached, new in specs:
        n = cached + new
        q, k, v = (torch.randn(n, h, d, generator=g) for h in (hq, hkv, hkv))
        seqs.append(Seq(q, k, v, cached, new))
    return seqs


def run_backend(
    seqs: list[Seq], page_size: int, phase: str = "prefill", layer_id: int = 1, seed: int = 1
) -> tuple[torch.Tensor, Batch, MHAKVCache]:
    """建一个 2 层的池子和打乱的页表；把每个请求的前缀 K/V 直接写进池子（就像前缀缓存命中），
    再让后端算这一步的新 token。返回 (输出, 批次, 池子)。"""
    hkv, d = seqs[0].k.shape[1:]
    lengths = [s.cached + s.new for s in seqs]
    num_pages = sum(-(-n // page_size) for n in lengths) + 3  # 多留几页，页号打乱
    pool = MHAKVCache(hkv, 2, d, num_pages, page_size, dtype=torch.float32, device="cpu")
    table = torch.full((len(seqs) + 1, max(lengths) + 5), -1, dtype=torch.int32)
    free = torch.randperm(num_pages, generator=torch.Generator().manual_seed(seed)).tolist()
    reqs = []
    for i, (s, n) in enumerate(zip(seqs, lengths)):
        row = len(seqs) - i  # 行号也打乱：第 i 个请求不在第 i 行
        npages = -(-n // page_size)
        table[row, :n] = page_slots(free[:npages], page_size, n)
        free = free[npages:]
        if s.cached:
            pool.store_kv(s.k[: s.cached], s.v[: s.cached], table[row, : s.cached], layer_id)
        reqs.append(Req(torch.arange(n, dtype=torch.int32), table_idx=row, cached_len=s.cached))
    backend = NativeAttnBackend(pool, table)
    batch = prepare_batch(Batch(reqs, phase), table)  # type: ignore[arg-type]
    backend.prepare_metadata(batch)
    q = torch.cat([s.q[s.cached :] for s in seqs])
    k = torch.cat([s.k[s.cached :] for s in seqs])
    v = torch.cat([s.v[s.cached :] for s in seqs])
    return backend.forward(q, k, v, layer_id, batch), batch, pool


def expected(seqs: list[Seq]) -> torch.Tensor:
    return torch.cat([dense_reference(s.q, s.k, s.v)[s.cached :] for s in seqs]).float()


CASES = {
    "prefill": [(0, 7)],
    "extend": [(5, 4)],
    "extend-one-page-boundary": [(4, 4)],
    "ragged-prefill": [(0, 5), (0, 1), (0, 9)],
    "ragged-extend": [(0, 6), (4, 3), (0, 2), (9, 1)],
}


@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize(("hq", "hkv"), [(4, 4), (4, 2), (8, 1)])
@pytest.mark.parametrize("case", CASES)
def test_matches_dense_causal_attention(case: str, hq: int, hkv: int, page_size: int) -> None:
    seqs = make_seqs(CASES[case], hq, hkv)
    out, batch, _ = run_backend(seqs, page_size)
    assert out.shape == (batch.num_tokens, hq, 16)
    torch.testing.assert_close(out, expected(seqs), rtol=0, atol=1e-5)


@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize(("hq", "hkv"), [(4, 2), (8, 1)])
def test_decode_batch(hq: int, hkv: int, page_size: int) -> None:
    # decode：每个请求 1 个新 token，前面的全部在池子里；长度各不相同，有的正好跨页
    seqs = make_seqs([(6, 1), (1, 1), (4, 1), (12, 1)], hq, hkv)
    out, batch, _ = run_backend(seqs, page_size, phase="decode")
    assert batch.is_decode
    torch.testing.assert_close(out, expected(seqs), rtol=0, atol=1e-5)


def test_page_size_does_not_change_the_output() -> None:
    # 同样的请求，页大小 1、4、8 时池子里的布局完全不同，输出应当逐位相同
    seqs = make_seqs([(0, 6), (5, 3), (0, 2), (10, 1)], 8, 2)
    outs = [run_backend(seqs, ps, seed=ps)[0] for ps in (1, 4, 8)]
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_prefill_step_by_step_equals_one_shot() -> None:
    # 真实的流程：先 prefill 前缀，再 extend，再 decode 两步，每步的 K/V 都由后端自己写进池子
    hq, hkv, d, page_size = 4, 2, 16, 4
    (s,) = make_seqs([(0, 11)], hq, hkv, d)
    pool = MHAKVCache(hkv, 1, d, num_pages=5, page_size=page_size, dtype=torch.float32,
                      device="cpu")  # fmt: skip
    table = torch.zeros(2, 16, dtype=torch.int32)
    table[1, :11] = page_slots([3, 0, 4], page_size, 11)
    backend = NativeAttnBackend(pool, table)
    tokens = torch.arange(11, dtype=torch.int32)
    outs = []
    for phase, lo, hi in [
        ("prefill", 0, 5),
        ("prefill", 5, 9),
        ("decode", 9, 10),
        ("decode", 10, 11),
    ]:
        req = Req(tokens[:hi], table_idx=1, cached_len=lo)
        batch = prepare_batch(Batch([req], phase), table)  # type: ignore[arg-type]
        backend.prepare_metadata(batch)
        outs.append(backend.forward(s.q[lo:hi], s.k[lo:hi], s.v[lo:hi], 0, batch))
    torch.testing.assert_close(torch.cat(outs), expected([s]), rtol=0, atol=1e-5)


def test_extend_needs_the_bottom_right_causal_mask() -> None:
    assert extend_causal_mask(2, 3).int().tolist() == [
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1],
    ]
    assert extend_causal_mask(0, 3).int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert extend_causal_mask(7, 1) is None  # decode：看全部，不需要掩码


def test_only_new_slots_are_written() -> None:
    # 前缀槽位里的 K/V 不会被重写；这一步的 K/V 写进 out_loc，而且只写进指定的那一层
    seqs = make_seqs([(5, 3)], 4, 2)
    _, batch, pool = run_backend(seqs, page_size=4, layer_id=1)
    meta = batch.attn_metadata
    assert isinstance(meta, NativeAttnMetadata)
    pages = meta.seqs[0].pages.tolist()
    assert len(pages) == 2  # 8 个 token、每页 4 个
    slots = page_slots(pages, 4, 8).long()
    assert batch.out_loc.tolist() == slots[5:8].tolist()
    flat_k = pool.k_cache(1).reshape(-1, 2, 16)
    torch.testing.assert_close(flat_k[slots], seqs[0].k, rtol=0, atol=0)
    assert pool.k_cache(0).abs().sum() == 0


def test_prepare_batch_fills_flat_tensors() -> None:
    table = torch.arange(3 * 10, dtype=torch.int32).reshape(3, 10) + 100
    reqs = [
        Req(torch.tensor([11, 12, 13, 14, 15]), table_idx=2),
        Req(torch.tensor([21, 22, 23, 24, 25, 26, 27]), table_idx=0, cached_len=4),
        Req(torch.tensor([31, 32]), table_idx=1),
    ]
    batch = prepare_batch(Batch(reqs, "prefill"), table)
    assert batch.input_ids.tolist() == [11, 12, 13, 14, 15, 25, 26, 27, 31, 32]
    assert batch.positions.tolist() == [0, 1, 2, 3, 4, 4, 5, 6, 0, 1]
    assert batch.out_loc.tolist() == [120, 121, 122, 123, 124, 104, 105, 106, 110, 111]
    assert make_positions(reqs).dtype == torch.int32
    assert cu_seqlens([5, 3, 2]).tolist() == [0, 5, 8, 10]
    too_long = Req(torch.arange(11), table_idx=0)
    with pytest.raises(ValueError, match="page table"):
        prepare_batch(Batch([too_long], "prefill"), table)


def test_get_last_indices() -> None:
    seqs = make_seqs([(0, 5), (4, 3), (0, 1), (2, 2)], 4, 2)
    _, batch, _ = run_backend(seqs, page_size=1)
    meta = batch.attn_metadata
    assert isinstance(meta, NativeAttnMetadata)
    assert meta.cu_seqlens_q.tolist() == [0, 5, 8, 9, 11]
    assert meta.get_last_indices(4).tolist() == [4, 7, 8, 10]
    assert meta.get_last_indices(2).tolist() == [4, 7]  # 只要前 bs 个（第 7 章补齐的批次）
    _, decode, _ = run_backend(make_seqs([(3, 1), (5, 1)], 4, 2), 1, "decode")
    assert decode.attn_metadata.get_last_indices(2).tolist() == [0, 1]


def test_forward_needs_its_own_metadata() -> None:
    seqs = make_seqs([(0, 2)], 2, 2)
    _, batch, pool = run_backend(seqs, page_size=1)
    batch.attn_metadata = object()  # type: ignore[assignment]
    backend = NativeAttnBackend(pool, torch.zeros(2, 4, dtype=torch.int32))
    with pytest.raises(TypeError, match="NativeAttnMetadata"):
        backend.forward(seqs[0].q, seqs[0].k, seqs[0].v, 1, batch)


def test_registry_and_factory(tiny_model: Path) -> None:
    config = ModelConfig.from_pretrained(tiny_model)
    pool = MHAKVCache(2, 2, 32, 4, 1, dtype=torch.float32, device="cpu")
    table = torch.zeros(2, 4, dtype=torch.int32)
    assert "torch" in SUPPORTED_ATTENTION_BACKENDS
    for name in ("torch", "auto"):
        backend = create_attention_backend(name, config, pool, table)
        assert isinstance(backend, NativeAttnBackend) and backend.page_table is table
    with pytest.raises(ValueError, match="unknown attention backend 'fa'; supported: torch"):
        create_attention_backend("fa", config, pool, table)
