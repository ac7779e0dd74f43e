"""逐组试 decode 注意力的分块和小批量线性层的参数（第 19 章"第七处"的两张表由它量出）。

GPU 上（默认）：每一组参数录进一张 CUDA Graph 里重放，注意力每层用各自的 K/V、线性层的权重复制
到 256 MB 以上，一遍读下来比 L2 大得多，和真实的 decode 一样从显存读；时间里含着图里相邻两个
kernel 之间的间隙。先在一个进程池里把所有组合编译一遍（填满 Triton 的磁盘缓存），再在本进程里
逐个计时，打印每个形状最快的几组，``--out`` 写成 JSON::

    python tools/tune_kernels.py --out tune.h200.json

``--offline`` 换一种输入：不再是每个请求一样长，而是基准测试离线那一行的负载（``full`` 预设，
256 个请求，提示和输出各 100～1024 个 token）在 decode 里每隔 ``--every`` 步取一步，那一步还在跑的
请求、各自真实的长度和引擎分配的槽位；每一步试同一套分块（段数 × 块 × warp × 流水级数）::

    python tools/tune_kernels.py --offline --out tune-offline.h200.json

没有 GPU 时 ``--check``：用 Triton 的解释器，在小形状上把每一类参数各挑几组跑一遍，核对结果
（注意力和逐个请求的 softmax 比，线性层和 ``F.linear`` 比）。它只说明这些参数算得对，不计时::

    python tools/tune_kernels.py --check

被试的是包里真正的函数：注意力换掉 ``triton_attn.decode_tiles_cuda`` 的返回值后调用
``decode_attention``，线性层把 ``LinearConfig`` 直接交给 ``linear_small_m``。所以 Hopper 上和
引擎一样打开了依赖启动（第 19 章第十处）；要看关掉时的数，设 ``MINISGL_DISABLE_PDL=1``。
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import multiprocessing
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F

from minisgl.attention import triton_attn  # 先导入它：没有 GPU 时它打开 Triton 的解释器
from minisgl.benchmark import save_results
from minisgl.benchmark.__main__ import PRESETS, offline_workload
from minisgl.kernel import triton_linear

HQ, HKV, HEAD_DIM, LAYERS = 16, 8, 128, 28  # Qwen3-0.6B 的注意力形状和层数
CONTEXT = 576  # 512 个 token 的提示再 decode 64 步
PROJECTIONS = {"qkv": (4096, 1024), "o_proj": (1024, 2048), "gate_up": (6144, 1024),
               "down": (1024, 3072)}  # fmt: skip
# 注意力：每个批大小试的段数；块大小、warp 数、流水级数对每个批大小都试
ATTN_SPLITS = {1: (8, 16, 32), 8: (4, 8, 16), 64: (1, 2, 4), 256: (1, 2)}
ATTN_TILES = list(itertools.product((32, 64, 128), (2, 4, 8), (1, 2, 3, 4)))
# --offline：每一步都试的段数和 (块, warp 数, 流水级数)
OFFLINE_SPLITS = (1, 2, 4, 8, 16)
OFFLINE_TILES = list(itertools.product((32, 64), (2, 4), (1, 2, 3)))
# 线性层：(block_n, block_k, split_k, num_warps, num_stages) 的取值，按 M 分两类
LINEAR_GRID = {
    1: ((4, 8, 16), (256, 512, 1024), (1, 2, 4, 8), (2, 4, 8), (1, 2, 3)),
    8: ((16, 32, 64), (128, 256, 512), (1, 2, 4), (2, 4), (1, 2, 3)),
}


def attention_configs(bs: int) -> list[tuple[int, dict[str, int]]]:
    """``(段数, tiles)``，tiles 的写法和 ``decode_tiles_cuda`` 的返回值一样。"""
    return [
        (splits, {"BLOCK_N": block, "num_warps": warps, "num_stages": stages})
        for (block, warps, stages), splits in itertools.product(ATTN_TILES, ATTN_SPLITS[bs])
    ]


def linear_configs(m: int) -> list[triton_linear.LinearConfig]:
    grid = LINEAR_GRID[1 if m == 1 else 8]
    return [
        triton_linear.LinearConfig(bn, bk, split, warps, stages, dot=m > 1)
        for bn, bk, split, warps, stages in itertools.product(*grid)
    ]


@contextmanager
def decode_tiles(splits: int, tiles: dict[str, int]) -> Iterator[None]:
    """让 ``decode_attention`` 用这一组参数：GPU 上换掉 ``decode_tiles_cuda``，解释器里换掉模块的
    ``NUM_SPLITS``、``BLOCK_N``（warp 数和流水级数对解释器没有意义）。"""
    saved = triton_attn.decode_tiles_cuda, triton_attn.NUM_SPLITS, triton_attn.BLOCK_N
    triton_attn.decode_tiles_cuda = lambda bs, heads: (splits, tiles)
    triton_attn.NUM_SPLITS, triton_attn.BLOCK_N = splits, tiles["BLOCK_N"]
    try:
        yield
    finally:
        triton_attn.decode_tiles_cuda, triton_attn.NUM_SPLITS, triton_attn.BLOCK_N = saved


def attention_inputs(
    bs: int, context: int, hkv: int, d: int, dtype: torch.dtype, device: str, seed: int,
    shuffle: bool,
) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """一层的输入，直接在 ``device`` 上生成：每个请求 ``context`` 个 token（页大小为 1 的页表）。
    ``shuffle``：槽位打乱（核对时）；否则每个请求的槽位连续，和刚分配的池子一样（计时时）。"""
    gen = torch.Generator(device).manual_seed(seed)
    slots = bs * context
    order = torch.randperm(slots, generator=gen, device=device) if shuffle else None
    table = (order if order is not None else torch.arange(slots, device=device)).view(bs, context)
    k, v = (torch.randn(slots, hkv, d, generator=gen, device=device).to(dtype) for _ in "kv")
    q = torch.randn(bs, 2 * hkv, d, generator=gen, device=device).to(dtype)
    rows = torch.arange(bs, dtype=torch.int32, device=device)
    lens = torch.full((bs,), context, dtype=torch.int32, device=device)
    return q, k, v, table.to(torch.int32), rows, lens


def offline_lengths() -> tuple[list[int], list[int]]:
    """基准测试离线那一行的负载（``full`` 预设，同一个种子）：每个请求的提示长度、输出长度。"""
    work = offline_workload(PRESETS["full"])
    return [len(prompt) for prompt in work.prompts], work.output_lens


def offline_attention_inputs(
    input_lens: list[int], output_lens: list[int], step: int, hkv: int, d: int,
    dtype: torch.dtype, device: str, seed: int,
) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """离线负载在 decode 第 ``step`` 步（prefill 全做完后的第一步是 0）时一层的输入。prefill 已经
    生成了 1 个 token，所以还在跑的是输出长度不小于 ``step + 2`` 的请求，各有提示 + ``step + 1``
    个 token 的 K/V（含这一步新写的）。槽位照引擎分配的样子：每个请求的提示连续；decode 每一步给
    还在跑的请求依次各分一个槽位，所以一个请求后来的 token 隔着一整批散开。"""
    gen = torch.Generator(device).manual_seed(seed)
    ins, outs = torch.tensor(input_lens), torch.tensor(output_lens)
    table = torch.zeros(len(input_lens), int(ins.max()) + step + 1, dtype=torch.int64)
    starts = torch.cumsum(ins, 0) - ins
    for i, (start, n) in enumerate(zip(starts.tolist(), input_lens)):
        table[i, :n] = torch.arange(start, start + n)
    next_slot = int(ins.sum())
    for s in range(step + 1):  # 循环结束时 rows 是这一步还在跑的请求
        rows = (outs >= s + 2).nonzero().squeeze(1)
        table[rows, ins[rows] + s] = next_slot + torch.arange(len(rows))
        next_slot += len(rows)
    k, v = (torch.randn(next_slot, hkv, d, generator=gen, device=device).to(dtype) for _ in "kv")
    q = torch.randn(len(rows), 2 * hkv, d, generator=gen, device=device).to(dtype)
    lens = (ins[rows] + step + 1).to(torch.int32)
    table, rows = table.to(torch.int32).to(device), rows.to(torch.int32).to(device)
    return q, k, v, table, rows, lens.to(device)


def reference_attention(q, k_pool, v_pool, table, rows, lens) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """逐个请求的 softmax（float32，在 CPU 上）。"""
    q, k_pool, v_pool, table = (t.float().cpu() for t in (q, k_pool, v_pool, table))
    group = q.shape[1] // k_pool.shape[1]
    out = torch.empty_like(q)
    for i, (row, n) in enumerate(zip(rows.tolist(), lens.tolist())):
        slots = table[row, :n].long()
        k = k_pool[slots].repeat_interleave(group, dim=1)
        v = v_pool[slots].repeat_interleave(group, dim=1)
        p = torch.softmax(torch.einsum("hd,nhd->hn", q[i], k) / math.sqrt(q.shape[-1]), dim=-1)
        out[i] = torch.einsum("hn,nhd->hd", p, v)
    return out


# ---------------------------------------------------------------- GPU：计时


def graph_time_us(calls: list[Callable[[], Any]], replays: int = 10) -> float:
    """把 ``calls`` 依次录进一张 CUDA Graph，重放 ``replays`` 次、量三遍取最快的，返回平均每个调用
    的微秒数。录之前在旁边的流上先跑一遍（编译、分配都在那时发生）。"""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = math.inf
    for _ in range(3):
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1000 / replays / len(calls))
    return best


def _compile(job: tuple[str, Any]) -> str | None:
    """进程池里编译一组参数（小输入，同样的常量），出错时返回错误。"""
    kind, args = job
    try:
        if kind == "attention":
            splits, tiles = args
            inputs = attention_inputs(1, 64, HKV, HEAD_DIM, torch.bfloat16, "cuda", 0, False)
            with decode_tiles(splits, tiles):
                triton_attn.decode_attention(*inputs)
        else:
            m, n, k, config = args
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            triton_linear.linear_small_m(x, torch.randn(n, k, device="cuda", dtype=x.dtype),
                                         config=config)  # fmt: skip
        torch.cuda.synchronize()
        return None
    except Exception as e:  # noqa: BLE001 —— 放不进共享内存之类的组合：记下，计时时跳过
        return f"{kind} {args}: {type(e).__name__}: {str(e)[:160]}"


def _compile_all(jobs: list[tuple[str, Any]], workers: int) -> None:
    """在进程池里把每一组编译一遍（填满 Triton 的磁盘缓存），计时时不再现编译。"""
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        errors = [e for e in pool.imap_unordered(_compile, jobs, chunksize=4) if e]
    print(f"编译了 {len(jobs)} 组，{time.perf_counter() - start:.0f} 秒，{len(errors)} 组出错")


def _time_attention(layers: list[tuple[torch.Tensor, ...]], row: dict[str, Any]) -> float:
    """每层的输入依次做一次 decode 注意力；``row`` 是段数加上 tiles。"""
    tiles = {key: value for key, value in row.items() if key != "splits"}
    with decode_tiles(row["splits"], tiles):
        return graph_time_us([lambda t=t: triton_attn.decode_attention(*t) for t in layers])


def _time_linear(x: torch.Tensor, weights: list[torch.Tensor], row: dict[str, Any] | None) -> float:
    """``x`` 依次乘每一份权重；``row`` 是 ``LinearConfig`` 的字段，None 时是 cuBLAS。"""
    if row is None:
        return graph_time_us([lambda w=w: F.linear(x, w) for w in weights])
    config = triton_linear.LinearConfig(**row)
    return graph_time_us(
        [lambda w=w: triton_linear.linear_small_m(x, w, config=config) for w in weights]
    )


def _rank(
    chosen: dict[str, Any], candidates: list[dict[str, Any]], time_us: Callable[[Any], float]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """给包里现在的选择和每个候选计时，返回（带时间的现在的选择，候选按时间从快到慢）。现在的选择
    必须能跑；候选里编译时就出错的组合（共享内存放不下之类）不进结果。"""
    timed = []
    for row in candidates:
        try:
            timed.append({**row, "us": time_us(row)})
        except Exception:  # noqa: BLE001
            continue
    return {**chosen, "us": time_us(chosen)}, sorted(timed, key=lambda r: r["us"])


def tune(batch_sizes: list[int], ms: list[int], workers: int) -> dict[str, Any]:
    jobs: list[tuple[str, Any]] = []
    for splits, tiles in {(s, tuple(t.items())) for bs in batch_sizes
                          for s, t in attention_configs(bs)}:  # fmt: skip
        jobs.append(("attention", (splits, dict(tiles))))
    jobs += [("linear", (m, n, k, c)) for m in ms for n, k in PROJECTIONS.values()
             for c in linear_configs(m)]  # fmt: skip
    _compile_all(jobs, workers)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(), "attention": [], "linear": []}
    for bs in batch_sizes:
        layers = [attention_inputs(bs, CONTEXT, HKV, HEAD_DIM, torch.bfloat16, "cuda", seed, False)
                  for seed in range(LAYERS)]  # fmt: skip
        splits, tiles = triton_attn.decode_tiles_cuda(bs, HKV)
        chosen, rows = _rank({"splits": splits, **tiles},
                             [{"splits": s, **t} for s, t in attention_configs(bs)],
                             functools.partial(_time_attention, layers))  # fmt: skip
        kv_bytes = 2 * bs * CONTEXT * HKV * HEAD_DIM * 2
        print(f"decode 注意力 batch {bs}：decode_tiles_cuda {chosen['us']:.2f} µs，最快 {rows[0]}，"
              f"{kv_bytes / rows[0]['us'] / 1e6:.2f} TB/s")  # fmt: skip
        result["attention"].append({"batch_size": bs, "chosen": chosen, "top": rows[:10]})
        del layers
    for m in ms:
        for name, (n, k) in PROJECTIONS.items():
            copies = max(8, (256 << 20) // (n * k * 2))
            weights = [
                torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)
            ]
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            cublas = _time_linear(x, weights, None)
            chosen, rows = _rank(
                triton_linear.pick_config(m, n, k)._asdict(),
                [c._asdict() for c in linear_configs(m)],
                functools.partial(_time_linear, x, weights),
            )
            print(f"线性层 M={m} {name}：cuBLAS {cublas:.2f} µs，pick_config {chosen['us']:.2f}，"
                  f"最快 {rows[0]}")  # fmt: skip
            result["linear"].append({"m": m, "name": name, "n": n, "k": k, "cublas_us": cublas,
                                     "chosen": chosen, "top": rows[:10]})  # fmt: skip
            del weights
    return result


def tune_offline(every: int, workers: int) -> dict[str, Any]:
    """离线负载里每隔 ``every`` 步的一步：``decode_tiles_cuda`` 的选择和每一组分块各量一遍。
    28 层轮流用 4 份各自的 K/V：每一份都比 L2 大得多，和真实的 decode 一样从显存读。"""
    configs = [(splits, {"BLOCK_N": block, "num_warps": warps, "num_stages": stages})
               for splits in OFFLINE_SPLITS for block, warps, stages in OFFLINE_TILES]  # fmt: skip
    _compile_all([("attention", config) for config in configs], workers)
    input_lens, output_lens = offline_lengths()
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(), "every": every, "steps": []}
    for step in range(0, max(output_lens) - 1, every):
        copies = [
            offline_attention_inputs(
                input_lens, output_lens, step, HKV, HEAD_DIM, torch.bfloat16, "cuda", seed
            )
            for seed in range(4)
        ]
        layers = [copies[i % len(copies)] for i in range(LAYERS)]
        lens = copies[0][5]
        bs = len(lens)
        splits, tiles = triton_attn.decode_tiles_cuda(bs, HKV)
        chosen, rows = _rank({"splits": splits, **tiles},
                             [{"splits": s, **t} for s, t in configs],
                             functools.partial(_time_attention, layers))  # fmt: skip
        kv_tokens, longest = int(lens.sum()), int(lens.max())
        tb_s = 2 * kv_tokens * HKV * HEAD_DIM * 2 / chosen["us"] / 1e6
        print(
            f"第 {step} 步 batch {bs}，KV {kv_tokens} 个 token（最长 {longest}）："
            f"decode_tiles_cuda {chosen['us']:.2f} µs（{tb_s:.2f} TB/s），最快 {rows[0]}"
        )
        result["steps"].append({"step": step, "batch_size": bs, "kv_tokens": kv_tokens,
                                "longest": longest, "chosen": chosen, "all": rows})  # fmt: skip
        del copies, layers
        torch.cuda.empty_cache()
    return result


# ---------------------------------------------------------------- 没有 GPU：核对


def check(limit: int) -> int:
    """每个批大小、每个 M 各取 ``limit`` 组（均匀地隔着挑），在解释器里核对结果。返回核对的组数。"""
    checked = 0
    for bs in ATTN_SPLITS:
        configs = attention_configs(bs)
        for splits, tiles in configs[:: max(1, len(configs) // limit)][:limit]:
            inputs = attention_inputs(3, 70, 2, 32, torch.float32, "cpu", bs, True)
            with decode_tiles(splits, tiles):
                got = triton_attn.decode_attention(*inputs)
            err = (got - reference_attention(*inputs)).abs().max().item()
            if err > 1e-4:
                raise AssertionError(f"attention {splits} {tiles}: max error {err:.3g}")
            checked += 1
    for m in LINEAR_GRID:
        configs = linear_configs(m)
        for config in configs[:: max(1, len(configs) // limit)][:limit]:
            x, w = torch.randn(m, 96), torch.randn(40, 96)
            err = (triton_linear.linear_small_m(x, w, config=config) - F.linear(x, w)).abs().max()
            if err > 1e-4:
                raise AssertionError(f"linear M={m} {config}: max error {err:.3g}")
            checked += 1
    return checked


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true", help="没有 GPU：在解释器里核对几组参数")
    ap.add_argument("--limit", type=int, default=3, help="--check 时每一类核对几组")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=list(ATTN_SPLITS))
    ap.add_argument("--m", type=int, nargs="*", default=[1, 8], choices=[1, 2, 4, 8, 16],
                    help="试哪几种 M 的线性层；只写 --m、不写数就只试注意力")  # fmt: skip
    ap.add_argument("--offline", action="store_true", help="注意力换成离线负载里真实的长度")
    ap.add_argument("--every", type=int, default=128, help="--offline 时每隔几步取一步")
    ap.add_argument("--workers", type=int, default=12, help="编译用的进程数")
    ap.add_argument("--out", help="结果写到这个 JSON 文件")
    ns = ap.parse_args(argv)
    if ns.check:
        print(f"核对了 {check(ns.limit)} 组参数，结果都对")
        return 0
    if not torch.cuda.is_available():
        ap.error("计时要 GPU；没有 GPU 时用 --check")
    if ns.offline:
        result = tune_offline(ns.every, ns.workers)
    else:
        unknown = set(ns.batch_sizes) - set(ATTN_SPLITS)
        if unknown:
            ap.error(f"batch sizes must be among {sorted(ATTN_SPLITS)}, got {sorted(unknown)}")
        result = tune(ns.batch_sizes, ns.m, ns.workers)
    if ns.out:
        save_results(result, ns.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
