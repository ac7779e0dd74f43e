"""第 4 章：core 里的数据结构——采样参数、请求的三个长度、批次的检查、上下文与 forward_batch。"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import pytest
import torch

from minisgl.attention import NativeAttnBackend
from minisgl.core import (
    Batch,
    Context,
    Req,
    SamplingParams,
    get_global_ctx,
    reset_global_ctx,
    set_global_ctx,
)
from minisgl.kvcache import MHAKVCache


@pytest.fixture(autouse=True)
def no_global_ctx() -> Iterator[None]:
    reset_global_ctx()
    yield
    reset_global_ctx()


def ids(n: int) -> torch.Tensor:
    return torch.arange(100, 100 + n, dtype=torch.int32)


def make_ctx(page_size: int = 1) -> Context:
    kv = MHAKVCache(2, 1, 8, num_pages=8, page_size=page_size, dtype=torch.float32, device="cpu")
    table = torch.zeros(4, 16, dtype=torch.int32)
    return Context(page_table=table, kv_cache=kv, attn_backend=NativeAttnBackend(kv, table))


# ---------------------------------------------------------------- SamplingParams


def test_sampling_params_fields_are_a_contract() -> None:
    # 第 12 章按字段名序列化；种子页面里打印出来的就是这个 repr
    # 后面的章节只在末尾加字段（第 16 章的 seed），前五个的名字、顺序和默认值不变
    names = [f.name for f in dataclasses.fields(SamplingParams)]
    assert names[:5] == ["temperature", "top_k", "top_p", "ignore_eos", "max_tokens"]
    p = SamplingParams(temperature=0.6, max_tokens=64)
    assert repr(p).startswith(
        "SamplingParams(temperature=0.6, top_k=-1, top_p=1.0, ignore_eos=False, max_tokens=64"
    )
    assert SamplingParams() == SamplingParams(0.0, -1, 1.0, False, 1024)


@pytest.mark.parametrize(
    ("params", "greedy"),
    [
        (SamplingParams(), True),
        (SamplingParams(temperature=0.7), False),
        (SamplingParams(temperature=0.7, top_k=1), True),
        (SamplingParams(temperature=0.0, top_p=0.9), True),  # 最大的那个总在 top-p 里
    ],
)
def test_is_greedy(params: SamplingParams, greedy: bool) -> None:
    assert params.is_greedy is greedy


# ---------------------------------------------------------------- Req


def test_req_lengths_through_prefill_and_decode() -> None:
    req = Req(ids(7), table_idx=3, cached_len=4, output_len=2)
    assert (req.cached_len, req.device_len, req.extend_len) == (4, 7, 3)
    assert (req.max_device_len, req.remain_len, req.can_decode) == (9, 2, True)
    assert req.host_len == 7
    # 一步之后：采样出的 token 记到主机上，它是下一步唯一的新 token
    req.append_host(555)
    req.complete_one()
    assert (req.cached_len, req.device_len, req.extend_len) == (7, 8, 1)
    assert req.input_ids.tolist()[-1] == 555 and req.input_ids.dtype == torch.int32
    assert req.host_len == len(req.input_ids) == 8
    assert req.output_ids == [555]
    req.append_host(torch.tensor([666]))
    req.complete_one()
    assert req.output_ids == [555, 666]
    assert (req.remain_len, req.can_decode) == (0, False)


@pytest.mark.parametrize("cached_len", [-1, 5, 6])
def test_req_must_compute_at_least_one_token(cached_len: int) -> None:
    # 全部命中缓存也要留最后 1 个 token 重算：没有它就没有 logits 可采样
    with pytest.raises(ValueError, match="cached_len"):
        Req(ids(5), table_idx=0, cached_len=cached_len)


def test_req_input_ids_must_be_1d_on_cpu() -> None:
    with pytest.raises(ValueError, match="1-D CPU"):
        Req(ids(6).reshape(2, 3), table_idx=0)
    with pytest.raises(ValueError, match="1-D CPU"):
        Req(ids(6).to("meta"), table_idx=0)


def test_reqs_compare_by_identity() -> None:
    a, b = Req(ids(3), 0), Req(ids(3), 0)
    assert a != b and a == a
    assert len({a, b}) == 2  # 可以放进集合（调度器的运行集合）


# ---------------------------------------------------------------- Batch


def test_batch_counts_requests_and_tokens() -> None:
    batch = Batch([Req(ids(5), 0), Req(ids(7), 1, cached_len=4)], "prefill")
    assert (batch.size, batch.num_tokens, batch.is_prefill, batch.is_decode) == (2, 8, True, False)
    assert repr(batch) == "Batch(phase='prefill', size=2, num_tokens=8)"  # 字段没填也能打印


def test_batch_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="phase"):
        Batch([Req(ids(2), 0)], "extend")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        Batch([], "prefill")
    with pytest.raises(ValueError, match="extend_len 1"):
        Batch([Req(ids(3), 0, cached_len=2), Req(ids(3), 1, cached_len=1)], "decode")


# ---------------------------------------------------------------- Context


def test_forward_batch_sets_and_clears_the_batch() -> None:
    ctx = make_ctx()
    batch = Batch([Req(ids(2), 0)], "prefill")
    with pytest.raises(RuntimeError, match="no active batch"):
        _ = ctx.batch
    with ctx.forward_batch(batch) as active:
        assert active is batch and ctx.batch is batch
    with pytest.raises(RuntimeError, match="no active batch"):
        _ = ctx.batch
    # 出错时也清空
    with pytest.raises(KeyError), ctx.forward_batch(batch):
        raise KeyError("boom")
    with pytest.raises(RuntimeError, match="no active batch"):
        _ = ctx.batch


def test_nested_forward_batch_raises_and_keeps_the_outer_batch() -> None:
    ctx = make_ctx()
    outer = Batch([Req(ids(2), 0)], "prefill")
    inner = Batch([Req(ids(3), 1)], "prefill")
    with ctx.forward_batch(outer):
        with pytest.raises(RuntimeError, match="nested forward_batch"):
            with ctx.forward_batch(inner):
                pass  # pragma: no cover
        assert ctx.batch is outer  # 失败的内层没有清掉外层
    with ctx.forward_batch(inner):  # 外层结束后可以开始下一个批次
        assert ctx.batch is inner


def test_context_page_size_comes_from_the_pool() -> None:
    assert make_ctx(page_size=4).page_size == 4


def test_global_context() -> None:
    with pytest.raises(RuntimeError, match="not set"):
        get_global_ctx()
    ctx = make_ctx()
    set_global_ctx(ctx)
    set_global_ctx(ctx)  # 同一个对象再设一次没关系（notebook 重跑）
    assert get_global_ctx() is ctx
    with pytest.raises(RuntimeError, match="already set"):
        set_global_ctx(make_ctx())
    reset_global_ctx()
    other = make_ctx()
    set_global_ctx(other)
    assert get_global_ctx() is other
