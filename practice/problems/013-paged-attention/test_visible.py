"""013 的可见测试：和逐头手算的稠密因果注意力对照。"""

import math

import torch
from solution import paged_attention


def reference(q_all, k_all, v_all, cached_len):
    """整个序列的因果注意力（float64 手算），取新 token 那几行。"""
    n, hq, d = q_all.shape
    group = hq // k_all.shape[1]
    out = torch.empty(n, hq, d, dtype=torch.float64)
    for h in range(hq):
        k, v = k_all[:, h // group].double(), v_all[:, h // group].double()
        for i in range(n):
            w = torch.softmax(k[: i + 1] @ q_all[i, h].double() / math.sqrt(d), dim=0)
            out[i, h] = w @ v[: i + 1]
    return out[cached_len:]


def build(n, cached_len, hq, hkv, d, page_size, pages, seed=0):
    """一个 n 个 token 的请求，放进打乱的页里；返回 (q 新 token, k_cache, v_cache, slots, 期望)。"""
    g = torch.Generator().manual_seed(seed)
    q_all = torch.randn(n, hq, d, generator=g)
    k_all = torch.randn(n, hkv, d, generator=g)
    v_all = torch.randn(n, hkv, d, generator=g)
    num_pages = max(pages) + 2
    k_cache = torch.randn(num_pages, page_size, hkv, d, generator=g)  # 其余格子是垃圾
    v_cache = torch.randn(num_pages, page_size, hkv, d, generator=g)
    slots = torch.tensor([pages[i // page_size] * page_size + i % page_size for i in range(n)])
    k_cache.view(-1, hkv, d)[slots] = k_all
    v_cache.view(-1, hkv, d)[slots] = v_all
    slots = torch.cat([slots, torch.full((3,), -1)]).to(torch.int32)  # 页表的一行比序列长
    return q_all[cached_len:], k_cache, v_cache, slots, reference(q_all, k_all, v_all, cached_len)


def check(n, cached_len, hq, hkv, page_size, pages, d=8):
    q, kc, vc, slots, want = build(n, cached_len, hq, hkv, d, page_size, pages)
    got = paged_attention(q, kc, vc, slots, cached_len)
    assert got.shape == (n - cached_len, hq, d), (
        f"形状应为 {(n - cached_len, hq, d)}，得到 {tuple(got.shape)}"
    )
    err = (got.double() - want).abs().max().item()
    assert err < 1e-5, f"最大误差 {err:.3g}"


def test_prefill_page_size_one():
    check(5, 0, 2, 2, 1, [4, 0, 6, 2, 1])


def test_extend_with_prefix():
    check(5, 3, 2, 2, 2, [3, 1, 0])


def test_decode():
    check(6, 5, 2, 2, 4, [2, 0])


def test_gqa():
    check(7, 2, 4, 2, 4, [1, 3])
