"""013 的隐藏测试：更多的 GQA 组合、跨页、只有一个 KV 头、输出的类型、dtype 与形状。"""

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


def run(n, cached_len, hq, hkv, page_size, pages, d=8, seed=1, dtype=torch.float32, tol=1e-5):
    """造一个请求跑 paged_attention；检查返回的是 dtype 与 q 相同、形状正确的张量，再比数值。"""
    g = torch.Generator().manual_seed(seed)
    q_all = torch.randn(n, hq, d, generator=g).to(dtype)
    k_all = torch.randn(n, hkv, d, generator=g).to(dtype)
    v_all = torch.randn(n, hkv, d, generator=g).to(dtype)
    num_pages = max(pages) + 1
    k_cache = torch.randn(num_pages, page_size, hkv, d, generator=g).to(dtype)
    v_cache = torch.randn(num_pages, page_size, hkv, d, generator=g).to(dtype)
    slots = torch.tensor([pages[i // page_size] * page_size + i % page_size for i in range(n)])
    k_cache.view(-1, hkv, d)[slots] = k_all
    v_cache.view(-1, hkv, d)[slots] = v_all
    got = paged_attention(q_all[cached_len:], k_cache, v_cache, slots.to(torch.int64), cached_len)
    # 先确认是真正的张量：只比数值的话，一个“和谁比都相等”的对象也能混过去
    assert type(got) is torch.Tensor, f"应返回 torch.Tensor，得到 {type(got).__name__}"
    assert got.dtype == dtype, f"输出 dtype 应和 q 一样是 {dtype}，得到 {got.dtype}"
    assert tuple(got.shape) == (n - cached_len, hq, d), f"形状不对：{tuple(got.shape)}"
    err = (got.double() - reference(q_all, k_all, v_all, cached_len)).abs().max().item()
    assert err < tol, f"n={n}, cached={cached_len}, Hq={hq}, Hkv={hkv}: 最大误差 {err:.3g}"
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
    # 输出 dtype 跟着 q 走：float64 进 float64 出，半精度进半精度出（不能一律变成 float32）
    run(4, 1, 2, 1, 2, [1, 0])
    run(6, 2, 4, 2, 2, [2, 0, 1], dtype=torch.float64, tol=1e-10)
    run(6, 2, 4, 2, 2, [2, 0, 1], dtype=torch.bfloat16, tol=5e-2)
    run(6, 2, 4, 2, 2, [2, 0, 1], dtype=torch.float16, tol=1e-2)
