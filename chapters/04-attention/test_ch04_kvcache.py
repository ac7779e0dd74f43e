"""第 4 章：KV 池——store_cache 等于按下标赋值、池子的形状与按页的视图、张量并行时的本地头数、
页到槽位的换算。"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import torch

from minisgl.attention import page_slots
from minisgl.distributed import reset_tp_info, set_tp_info
from minisgl.kernel import store_cache
from minisgl.kvcache import BaseKVCachePool, MHAKVCache, create_kvcache_pool
from minisgl.models.config import ModelConfig


@pytest.fixture(autouse=True)
def single_rank() -> Iterator[None]:
    reset_tp_info()
    yield
    reset_tp_info()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("flat_input", [False, True])
def test_store_cache_equals_index_assignment(dtype: torch.dtype, flat_input: bool) -> None:
    # 官方 tests/kernel/test_store.py 的对照：CUDA kernel 的结果 == 一行按下标赋值
    g = torch.Generator().manual_seed(0)
    slots, heads, dim, n = 50, 2, 16, 12
    k_cache = torch.randn(slots, heads, dim, generator=g).to(dtype)
    v_cache = torch.randn(slots, heads, dim, generator=g).to(dtype)
    indices = torch.randperm(slots, generator=g)[:n].to(torch.int32)
    k = torch.randn(n, heads, dim, generator=g).to(dtype)
    v = torch.randn(n, heads, dim, generator=g).to(dtype)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    want_k[indices.long()] = k
    want_v[indices.long()] = v
    if flat_input:
        k, v = k.reshape(n, heads * dim), v.reshape(n, heads * dim)
    store_cache(k_cache, v_cache, indices, k, v)
    assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)


def test_store_cache_accepts_a_strided_view_of_qkv() -> None:
    # AttentionLayer 传进来的 k、v 是从 qkv 大矩阵里 split 出来的、不连续的视图
    qkv = torch.randn(5, 3 * 8)
    _, k, v = qkv.split([8, 8, 8], dim=-1)
    assert not k.is_contiguous()
    k_cache, v_cache = torch.zeros(10, 2, 4), torch.zeros(10, 2, 4)
    store_cache(k_cache, v_cache, torch.tensor([9, 0, 3, 4, 7]), k, v)
    assert torch.equal(k_cache[[9, 0, 3, 4, 7]], k.reshape(5, 2, 4))
    assert torch.equal(v_cache[[9, 0, 3, 4, 7]], v.reshape(5, 2, 4))
    assert k_cache[[1, 2, 5, 6, 8]].abs().sum() == 0  # 别的槽位没有被碰


def test_store_cache_refuses_a_silent_dtype_change() -> None:
    with pytest.raises(TypeError, match="dtype"):
        store_cache(torch.zeros(4, 1, 2), torch.zeros(4, 1, 2), torch.tensor([0]),
                    torch.zeros(1, 1, 2, dtype=torch.float64), torch.zeros(1, 1, 2))  # fmt: skip


def test_pool_layout_and_store_kv() -> None:
    pool = MHAKVCache(
        num_kv_heads=2, num_layers=3, head_dim=4, num_pages=5, page_size=4,
        dtype=torch.float32, device="cpu",
    )  # fmt: skip
    assert isinstance(pool, BaseKVCachePool)
    assert pool.k_cache(0).shape == (5, 4, 2, 4)  # (页数, page_size, kv 头数, head_dim)
    assert (pool.num_layers, pool.num_pages, pool.page_size, pool.num_slots) == (3, 5, 4, 20)
    assert pool.num_bytes == 2 * 3 * 5 * 4 * 2 * 4 * 4
    k, v = torch.randn(3, 2, 4), torch.randn(3, 2, 4)
    pool.store_kv(k, v, torch.tensor([1, 6, 19], dtype=torch.int32), layer_id=1)
    # 槽位 s 在第 s // 4 页的第 s % 4 格
    for i, slot in enumerate([1, 6, 19]):
        assert torch.equal(pool.k_cache(1)[slot // 4, slot % 4], k[i])
        assert torch.equal(pool.v_cache(1)[slot // 4, slot % 4], v[i])
    # 别的层一点没动（新池子是全 0）
    assert pool.k_cache(0).abs().sum() == 0 and pool.v_cache(2).abs().sum() == 0
    # k_cache(layer) 是视图：后端读到的就是刚写进去的
    assert pool.k_cache(1).data_ptr() == pool._kv_buffer[0, 1].data_ptr()


@pytest.mark.parametrize(("tp", "local"), [(1, 2), (2, 1), (4, 1)])
def test_pool_keeps_only_this_ranks_kv_heads(tp: int, local: int) -> None:
    # 2 个 KV 头：tp=2 时各存 1 个，tp=4 时两个 rank 存同一个头的副本
    set_tp_info(tp - 1, tp)
    pool = MHAKVCache(2, 1, 8, num_pages=2, page_size=1, dtype=torch.float32, device="cpu")
    assert pool.k_cache(0).shape == (2, 1, local, 8)


def test_pool_rejects_empty_sizes() -> None:
    with pytest.raises(ValueError, match="num_pages"):
        MHAKVCache(2, 1, 8, num_pages=0, page_size=1, dtype=torch.float32, device="cpu")


def test_create_pool_from_model_config(tiny_model: Path) -> None:
    config = ModelConfig.from_pretrained(tiny_model)
    pool = create_kvcache_pool(config, num_pages=3, page_size=16, dtype=torch.float32, device="cpu")
    assert pool.num_layers == config.num_layers
    assert pool.k_cache(0).shape == (3, 16, config.num_kv_heads, config.head_dim)


def test_page_slots() -> None:
    assert page_slots([5, 2], page_size=4, length=7).tolist() == [20, 21, 22, 23, 8, 9, 10]
    assert page_slots([3, 0, 7], page_size=1, length=3).tolist() == [3, 0, 7]
    assert page_slots(torch.tensor([1]), page_size=8, length=0).tolist() == []
    assert page_slots([4], page_size=2, length=2).dtype == torch.int32
    with pytest.raises(ValueError, match="cannot hold"):
        page_slots([1, 2], page_size=4, length=9)
