"""extend 注意力的一个候选写法和现在的 ``extend_attention`` 比：一个程序带着一个 KV 头的整组
q 头（GQA 打包，K/V 只读一次），指数用 ``exp`` 或 ``exp2``，几组块。

GPU 上：几种批次（一样长的、长短不一的、很长的、带前缀的），每种写法把 28 层录进一张 CUDA
Graph，重放 10 次取一层的中位数（微秒），连同和现在的输出差的最大值，写进 ``--out``。
``--check``：没有 GPU 也能跑，只在一个小形状上核对候选写法和现在的输出（Triton 解释器）。

    python tools/extend_gqa_ab.py --out chapters/19-bench/extend-gqa-ab.h100.json
    python tools/extend_gqa_ab.py --check
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

# 先导入它：没有 GPU 时它打开 Triton 的解释器，之后才能导入 triton
from minisgl.attention.triton_attn import extend_attention, extend_tiles, extend_work  # noqa: E402
from minisgl.utils.device import pick_device  # noqa: E402

import triton  # isort: skip  # noqa: E402
import triton.language as tl  # isort: skip  # noqa: E402

LOG2E = math.log2(math.e)
# (每块 token 数, BLOCK_N, warp 数, 流水级数)：每个程序的 q 行数是组的大小 × 每块 token 数
GPU_CONFIGS = [(64, 32, 4, 3), (64, 32, 8, 3), (64, 64, 8, 3), (64, 64, 8, 2), (32, 32, 4, 3),
               (32, 64, 4, 3), (32, 64, 4, 2), (64, 128, 8, 2), (128, 64, 8, 2)]  # fmt: skip
CHECK_CONFIGS = [(16, 16, 4, 1), (32, 16, 4, 1)]


@triton.jit
def _step(
    acc, l_i, m_i, q, K, V, PT, row, kvh, n, kv_end, pos_q, stride_kt, stride_kh, stride_pt,
    qk_scale, D: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, EXP2: tl.constexpr,
):  # fmt: skip
    offs_d = tl.arange(0, D)
    offs_n = n + tl.arange(0, BLOCK_N)
    n_mask = offs_n < kv_end
    slot = tl.load(PT + row * stride_pt + offs_n, mask=n_mask, other=0).to(tl.int64)
    kv_offs = slot[:, None] * stride_kt + kvh * stride_kh + offs_d[None, :]
    k = tl.load(K + kv_offs, mask=n_mask[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if MASKED:
        s = tl.where((offs_n[None, :] <= pos_q[:, None]) & n_mask[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    if EXP2:  # qk_scale 里已经乘了 log2(e)
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
    else:
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
    v = tl.load(V + kv_offs, mask=n_mask[:, None], other=0.0)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, l_i, m_new


@triton.jit
def _packed_kernel(
    Q, K, V, OUT, PT, ROWS, CU_Q, CACHED, WORK, stride_qt, stride_qh, stride_kt, stride_kh,
    stride_ot, stride_oh, stride_pt, qk_scale, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
    D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EXP2: tl.constexpr,
):  # fmt: skip
    # 网格 (KV 头数, 工作表)：第 r 行是组里第 r // BLOCK_M 个头、这一块里第 r % BLOCK_M 个 token
    kvh = tl.program_id(0)
    b = tl.load(WORK + 2 * tl.program_id(1))
    mb = tl.load(WORK + 2 * tl.program_id(1) + 1)
    q_start = tl.load(CU_Q + b)
    extend_len = tl.load(CU_Q + b + 1) - q_start
    cached = tl.load(CACHED + b)
    row = tl.load(ROWS + b).to(tl.int64)
    offs_r = tl.arange(0, GROUP_PAD * BLOCK_M)
    g = offs_r // BLOCK_M
    offs_m = mb * BLOCK_M + offs_r % BLOCK_M
    heads = kvh * GROUP + g
    offs_d = tl.arange(0, D)
    r_mask = (offs_m < extend_len) & (g < GROUP)
    tok = (q_start + offs_m).to(tl.int64)
    q = tl.load(Q + tok[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :],
                mask=r_mask[:, None], other=0.0)  # fmt: skip
    pos_q = cached + offs_m
    m_i = tl.full([GROUP_PAD * BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD * BLOCK_M], tl.float32)
    acc = tl.zeros([GROUP_PAD * BLOCK_M, D], tl.float32)
    kv_end = tl.minimum(cached + extend_len, cached + (mb + 1) * BLOCK_M)
    full_end = (cached + mb * BLOCK_M) // BLOCK_N * BLOCK_N
    for n in range(0, full_end, BLOCK_N):
        acc, l_i, m_i = _step(acc, l_i, m_i, q, K, V, PT, row, kvh, n, kv_end, pos_q, stride_kt,
                              stride_kh, stride_pt, qk_scale, D, BLOCK_N, False, EXP2)  # fmt: skip
    for n in range(full_end, kv_end, BLOCK_N):
        acc, l_i, m_i = _step(acc, l_i, m_i, q, K, V, PT, row, kvh, n, kv_end, pos_q, stride_kt,
                              stride_kh, stride_pt, qk_scale, D, BLOCK_N, True, EXP2)  # fmt: skip
    tl.store(OUT + tok[:, None] * stride_ot + heads[:, None] * stride_oh + offs_d[None, :],
             (acc / l_i[:, None]).to(OUT.dtype.element_ty), mask=r_mask[:, None])  # fmt: skip


def packed_attention(
    q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, meta: Sequence[torch.Tensor],
    work: torch.Tensor, out: torch.Tensor, config: tuple[int, int, int, int], exp2: bool,
) -> torch.Tensor:  # fmt: skip
    """候选写法；参数和 ``extend_attention`` 一样（``meta`` 是页表、行号、前缀和、前缀长度），
    ``work`` 按 ``config`` 的每块 token 数切。"""
    _, num_q_heads, d = q.shape
    group = num_q_heads // k_pool.shape[1]
    block_m, block_n, warps, stages = config
    page_table, rows, cu_q, cached = meta
    _packed_kernel[(k_pool.shape[1], work.shape[0])](
        q, k_pool, v_pool, out, page_table, rows, cu_q, cached, work,
        q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1), out.stride(0),
        out.stride(1), page_table.stride(0), (LOG2E if exp2 else 1.0) / math.sqrt(d),
        GROUP=group, GROUP_PAD=triton.next_power_of_2(group), D=d, BLOCK_M=block_m,
        BLOCK_N=block_n, EXP2=exp2, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out


def make_case(
    extend: Sequence[int], cached: Sequence[int], device: torch.device, dtype: torch.dtype,
    heads: tuple[int, int, int] = (16, 8, 128), seed: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """一批请求：每个请求的槽位在池子里首尾相接（新建的池子分页时大致如此）。"""
    hq, hkv, d = heads
    gen = torch.Generator().manual_seed(seed)
    lens = [e + c for e, c in zip(extend, cached)]
    page_table = torch.zeros(len(lens), max(lens), dtype=torch.int32)
    start = 0
    for i, n in enumerate(lens):
        page_table[i, :n] = torch.arange(start, start + n, dtype=torch.int32)
        start += n
    cu = torch.zeros(len(extend) + 1, dtype=torch.int32)
    cu[1:] = torch.tensor(extend).cumsum(0)
    pools = [torch.randn(start, hkv, d, generator=gen).to(device, dtype) for _ in range(2)]
    meta = [page_table, torch.arange(len(lens), dtype=torch.int32), cu,
            torch.tensor(cached, dtype=torch.int32)]  # fmt: skip
    return {"q": torch.randn(int(cu[-1]), hq, d, generator=gen).to(device, dtype),
            "pools": pools, "meta": [x.to(device) for x in meta],
            "extend": list(extend), "cached": list(cached)}  # fmt: skip


def _work(case: dict[str, Any], block_m: int) -> torch.Tensor:
    items = extend_work(case["extend"], case["cached"], block_m)
    return torch.tensor(items, dtype=torch.int32, device=case["q"].device).view(-1, 2)


def layer_us(fn: Callable[[], Any], layers: int = 28, replays: int = 10) -> float:
    """把 ``layers`` 次调用录进一张 CUDA Graph，重放 ``replays`` 次，一次调用的微秒数取中位数。"""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(layers):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / layers)
    return sorted(times)[len(times) // 2]


def compare(case: dict[str, Any], configs: Sequence[tuple[int, int, int, int]], timed: bool
            ) -> dict[str, Any]:  # fmt: skip
    """现在的写法和每组候选：各自一层的微秒数（``timed``），候选和现在的输出差的最大值。"""
    q, (k_pool, v_pool) = case["q"], case["pools"]
    now_out = torch.empty_like(q)
    now_work = _work(case, extend_tiles(q.device, q.dtype)["BLOCK_M"])

    def now() -> torch.Tensor:
        return extend_attention(q, k_pool, v_pool, *case["meta"], now_work, out=now_out)

    now()
    row: dict[str, Any] = {
        "tokens": sum(case["extend"]),
        "now_us": layer_us(now) if timed else None,
    }
    for config in configs:
        work = _work(case, config[0])
        for exp2 in (False, True):
            out = torch.full_like(q, float("nan"))

            def candidate(
                work: torch.Tensor = work, out: torch.Tensor = out,
                config: tuple[int, int, int, int] = config, exp2: bool = exp2,
            ) -> torch.Tensor:  # fmt: skip
                return packed_attention(q, k_pool, v_pool, case["meta"], work, out, config, exp2)

            candidate()
            name = "packed {}x{} w{} s{}".format(*config) + (" exp2" if exp2 else "")
            diff = (out.float() - now_out.float()).abs().max().item()
            row[name] = {"us": layer_us(candidate) if timed else None, "max_diff": diff}
    return row


def gpu_cases(device: torch.device) -> dict[str, dict[str, Any]]:
    rng = random.Random(0)
    mixed = [rng.randint(141, 1013) for _ in range(26)]
    bf16 = torch.bfloat16
    return {
        "32x512": make_case([512] * 32, [0] * 32, device, bf16),
        "26 mixed": make_case(mixed, [0] * 26, device, bf16),
        "8x2048": make_case([2048] * 8, [0] * 8, device, bf16),
        "16x256 +768 prefix": make_case([256] * 16, [768] * 16, device, bf16),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="只在小形状上核对输出（可以没有 GPU）")
    ap.add_argument("--out", help="结果写进这个 JSON")
    ns = ap.parse_args(argv)
    device = pick_device()
    if ns.check:
        case = make_case([45, 20, 1, 70], [0, 150, 37, 5], device, torch.float32, (4, 2, 16))
        row = compare(case, CHECK_CONFIGS, timed=False)
        worst = max(v["max_diff"] for k, v in row.items() if k.startswith("packed"))
        print(f"max diff {worst:.2e}")
        return 0 if worst < 1e-4 else 1
    if device.type != "cuda":
        ap.error("timing needs a GPU; use --check without one")
    rows = {
        name: compare(case, GPU_CONFIGS, timed=True) for name, case in gpu_cases(device).items()
    }
    for name, row in rows.items():
        print(name, "now", round(row["now_us"], 1))
        for key, v in row.items():
            if key.startswith("packed"):
                print(f"    {key}: {v['us']:.1f} us, max diff {v['max_diff']:.3g}")
    if ns.out:
        result = {"device": torch.cuda.get_device_name(), "rows": rows}
        Path(ns.out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
