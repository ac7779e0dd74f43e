"""013 的隐藏测试：更多的 GQA 组合、跨页、只有一个 KV 头、输出 dtype。"""

import math

import torch
from solution import paged_attention


def reference(q_all, k_all, v_all, cached_len):
    n, hq, d = q_all.shape
    group = hq // k_all.shape[1]
    out = torch.empty(n, hq, d, dtype=torch.float64)
    for h in range(hq):
        k, v = k_all[:, h // group].double(), v_all[:, h // group].double()
        for i in range(n):
            w = torch.softmax(k[: i + 1] @ q_all[i, h].double() / math.sqrt(d), dim=0)
            out[i, h] = w @ v[: i + 1]
    return out[cached_len:]


def run(n, cached_len, hq, hkv, page_size, pages, d=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    q_all = torch.randn(n, hq, d, generator=g)
    k_all = torch.randn(n, hkv, d, generator=g)
    v_all = torch.randn(n, hkv, d, generator=g)
    num_pages = max(pages) + 1
    k_cache = torch.randn(num_pages, page_size, hkv, d, generator=g)
    v_cache = torch.randn(num_pages, page_size, hkv, d, generator=g)
    slots = torch.tensor([pages[i // page_size] * page_size + i % page_size for i in range(n)])
    k_cache.view(-1, hkv, d)[slots] = k_all
    v_cache.view(-1, hkv, d)[slots] = v_all
    got = paged_attention(q_all[cached_len:], k_cache, v_cache, slots.to(torch.int64), cached_len)
    err = (got.double() - reference(q_all, k_all, v_all, cached_len)).abs().max().item()
    assert err < 1e-5, f"n={n}, cached={cached_len}, Hq={hq}, Hkv={hkv}: 最大误差 {err:.3g}"
    return got


def test_eight_q_heads_one_kv_head():
    run(6, 2, 8, 1, 2, [0, 2, 1])


def test_eight_q_heads_two_kv_heads():
    run(9, 4, 8, 2, 4, [2, 0, 1])


def test_long_prefix_single_new_token():
    run(17, 16, 4, 2, 4, [4, 1, 3, 0, 2])


def test_whole_sequence_is_new():
    run(8, 0, 4, 2, 8, [1])


def test_prefix_ends_mid_page():
    run(10, 5, 6, 3, 4, [2, 0, 1])


def test_keeps_dtype():
    got = run(4, 1, 2, 1, 2, [1, 0])
    assert got.dtype == torch.float32
