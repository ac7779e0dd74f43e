"""decode 一步里的 kernel 参数放进整步 decode 里比（第 19 章第十三处起的几张表由它量出）。

``tune_kernels.py`` 把一种 kernel 单独连着跑；这里量的是真实的一步：每一组参数各建一个 ``LLM``
（CUDA Graph 在建的时候就录好了，换参数就得重建），用基准测试的 ``decode_latency`` 量几个小批次。
一组参数可以换这几样东西：程序数少于 64（batch × KV 头数）、或者正好 64 时
``decode_tiles_cuda`` 的返回值（注意力的分块），M = 1、K 比一块长时 ``pick_config`` 的返回值
（o_proj、down 的 GEMV 切不切 K：切了就多一个合并部分和的 kernel），几行时 ``pick_config`` 的
返回值（输出比输入宽的 qkv、gate_up 和不比输入宽的 o_proj、down 分开换），M = 1 的 gate_up 连
SiLU-mul 那个 kernel 的参数，或者把它拆回 GEMV 和 SiLU-mul 两个 kernel（全部，或者只有几行
时），或者让写 KV 离开 q/k 的归一化和 RoPE 那个 kernel、自己一个 kernel，或者改按行处理的 kernel
每个程序读多少个数（``ROW_ELEMENTS``）、合并部分和的 kernel 每个程序算几个输出，或者换用另一个
文件里的 decode 注意力 kernel（``--attention-from``，比如别的版本的 ``triton_kernels.py``：
``git show REV:路径 > 文件``）。
几组参数按"去一遍、回一遍"的顺序各量两次，抵消机器随时间的漂移；``--context`` 换每个请求的
上下文长度（默认 512）::

    python tools/decode_tiles_ab.py --out /tmp/tiles.json

没有 GPU 时 ``--check`` 用内嵌的小模型、很少的步数把流程走一遍（CPU 上不走这两个函数，量出的
数没有意义），只说明脚本能跑、跑完换回了原来的函数；它不看 ``--context``，上下文固定 16 个 token。
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from minisgl.attention import BaseAttnBackend, TritonAttnBackend, triton_attn
from minisgl.benchmark import offline, save_results
from minisgl.engine import has_weight_files
from minisgl.kernel import ops, triton_linear
from minisgl.kernel.triton_linear import LinearConfig
from minisgl.llm import LLM
from minisgl.models import utils as model_utils
from minisgl.utils import dtype_from_str, pick_device

SMALL = 64  # 程序数少于它时换分块（和 decode_tiles_cuda 里"只有几个请求"的那一档一致）


@dataclass(frozen=True)
class Variant:
    """一组参数；None 的那一样不换。"""

    attention: tuple[int, dict[str, int]] | None = None  # (段数, tiles)，只有几个请求时
    exactly_64: bool = False  # 分块只换程序数正好 64 的那一档（8 个 KV 头时 batch 8），不换更少的
    gemv_long_k: LinearConfig | None = None  # M = 1、K 比一块长（o_proj、down）时
    rows_wide: LinearConfig | None = None  # M > 1、输出比输入宽（qkv、gate_up）时
    rows_narrow: LinearConfig | None = None  # M > 1、输出不比输入宽（o_proj、down）时
    gate_silu: LinearConfig | None = None  # M = 1 的 gate_up 连 SiLU-mul 那个 kernel 的参数
    # 至少这么多行（token）时 gate_up 的 GEMV 和 SiLU-mul 分成两个 kernel（合成之前的写法）；
    # 1：全都分开，2：只有一行时合成（几行时也合成之前的写法）
    silu_apart_from: int | None = None
    store_apart: bool = False  # 写 KV 单独一个 kernel，不在 q/k 的归一化和 RoPE 那个 kernel 里
    # 按行处理的 kernel（RMSNorm、q/k 的归一化）每个程序读多少个数：换掉 triton_ops.ROW_ELEMENTS
    row_elements: tuple[tuple[int, int], ...] | None = None
    sum_block: int | None = None  # 合并部分和的 kernel 每个程序算几个输出（``_SUM_BLOCK``）
    attention_from: str | None = None  # decode 注意力的 partial kernel 取自这个文件


def _attn(
    splits: int, warps: int, stages: int, exactly_64: bool = False, block_n: int = 64
) -> Variant:
    tiles = {"BLOCK_N": block_n, "num_warps": warps, "num_stages": stages}
    return Variant(attention=(splits, tiles), exactly_64=exactly_64)


VARIANTS: dict[str, Variant] = {
    "now": Variant(),
    "16s-8w2s": _attn(16, 8, 2),
    "16s-4w4s": _attn(16, 4, 4),
    "8s-4w4s": _attn(8, 4, 4),
    "8s-8w2s": _attn(8, 8, 2),
    "4s-4w4s": _attn(4, 4, 4),
    # 程序数正好 64（batch 8）的那一档：现在是 16 段、一块 32 个 token、2 个 warp、不流水
    "b8-16s-4w1s": _attn(16, 4, 1, exactly_64=True),
    "b8-8s-4w2s": _attn(8, 4, 2, exactly_64=True),
    "b8-8s-8w2s": _attn(8, 8, 2, exactly_64=True),
    "b8-4s-4w2s": _attn(4, 4, 2, exactly_64=True),
    # 同一档，一块 32 个 token（现在的）和 64 个（之前的）：上下文 215 时 64 个一块只有 4 段有活
    "b8-16s-2w1s-32n": _attn(16, 2, 1, exactly_64=True, block_n=32),
    "b8-16s-2w1s-64n": _attn(16, 2, 1, exactly_64=True),
    "b8-16s-4w1s-32n": _attn(16, 4, 1, exactly_64=True, block_n=32),
    "b8-16s-2w2s-32n": _attn(16, 2, 2, exactly_64=True, block_n=32),
    "b8-8s-2w1s-32n": _attn(8, 2, 1, exactly_64=True, block_n=32),
    "b8-16s-2w1s-16n": _attn(16, 2, 1, exactly_64=True, block_n=16),
    # 程序数少于 64（batch 1～7）时也试 32 个 token 一块
    "16s-8w2s-32n": _attn(16, 8, 2, block_n=32),
    "16s-4w2s-32n": _attn(16, 4, 2, block_n=32),
    # o_proj、down 不切 K：每个 program 沿 K 读完自己那几行，不再启动合并的 kernel
    "gemv-nosplit-8": Variant(gemv_long_k=LinearConfig(8, 1024, 1, num_warps=2, num_stages=2)),
    "gemv-nosplit-4": Variant(gemv_long_k=LinearConfig(4, 1024, 1, num_warps=2, num_stages=2)),
    # 几行时 qkv、gate_up 不切 K：qkv 少一个合并部分和的 kernel（gate_up 的那个 kernel 还要做 SiLU）
    "rows-wide-16": Variant(rows_wide=LinearConfig(16, 512, 1, 4, 2, dot=True)),
    # 几行时 qkv、gate_up 的程序更多：每个 32 行（qkv 128 × 4 段），或者沿 K 切 8 段、一段 128 个
    "rows-wide-32n": Variant(rows_wide=LinearConfig(32, 256, 4, 4, 2, dot=True)),
    "rows-wide-8s": Variant(rows_wide=LinearConfig(64, 128, 8, 4, 2, dot=True)),
    # 几行时 o_proj、down 每个程序 16 行（现在 32 行）
    "rows-narrow-16n": Variant(rows_narrow=LinearConfig(16, 512, 4, 4, 2, dot=True)),
    # 几行时的 GEMV 换成 8 个 warp：sm_90 上现在的两组每个线程用满 255 个寄存器，还溢出 840、
    # 1,176 字节（triton 3.6）；这两组不溢出（156、255 个寄存器），程序数和现在一样
    "rows-8w": Variant(
        rows_wide=LinearConfig(64, 128, 4, 8, 2, dot=True),
        rows_narrow=LinearConfig(32, 512, 4, 8, 2, dot=True),
    ),
    # 几行时每个程序只读一块 K：现在 down（K = 3072）最多切 4 段，一段 1,024 个元素、一块 512 个，
    # 每个程序读两块（共享内存只够放一块 W 加一块 x，两块的读没有流水）。切 6 段、每段
    # 一块（一块 512 个；o_proj 仍是 4 段），或者一块 256 个（o_proj 8 段、down 12 段，不溢出）
    "rows-narrow-6s": Variant(rows_narrow=LinearConfig(32, 512, 6, 4, 2, dot=True)),
    "rows-narrow-256k": Variant(rows_narrow=LinearConfig(32, 256, 12, 4, 2, dot=True)),
    # 几行时四个投影都不用 tl.dot：逐元素乘加，每个程序 4 行 W、一块 256 个元素、切 4 段
    "rows-fma": Variant(
        rows_wide=LinearConfig(4, 256, 4, 4, 2), rows_narrow=LinearConfig(4, 256, 4, 4, 2)
    ),
    "silu-apart": Variant(silu_apart_from=1),
    "silu-apart-m2": Variant(silu_apart_from=2),
    "silu-16-4w": Variant(gate_silu=LinearConfig(16, 1024, 1, num_warps=4, num_stages=2)),
    # 同一个 kernel 不溢出寄存器的两组：现在这组（8 行、一块 1,024 个、2 个 warp）在 sm_90 上
    # 每个线程只分到 32 个寄存器、3,368 字节放在栈上（triton 3.6）；一块 512 个时 168 个寄存器，
    # 4 个 warp 时 232 个，都不溢出
    "silu-512k": Variant(gate_silu=LinearConfig(8, 512, 1, num_warps=2, num_stages=2)),
    "silu-4w": Variant(gate_silu=LinearConfig(8, 1024, 1, num_warps=4, num_stages=2)),
    "store-apart": Variant(store_apart=True),
    # token 少于 512 个时按行处理的 kernel 每个程序读多少个数（量的时候是一律 512 个：隐藏层 1,024
    # 维时一行一个程序，head_dim 128 时 4 行）；rows-4096 是不分档、一律 4,096 个（之前的写法）
    "rows-4096": Variant(row_elements=((1, 4096),)),
    "rows-1k": Variant(row_elements=((1, 1024), (512, 4096))),
    "rows-256": Variant(row_elements=((1, 256), (512, 4096))),
    "rows-128": Variant(row_elements=((1, 128), (512, 4096))),
    # 合并部分和的 kernel 每个程序少算几个输出、程序多一些（现在 256 个：N = 1024 时每行 4 个程序）
    "sum-128": Variant(sum_block=128),
    "sum-64": Variant(sum_block=64),
}


def _silu_apart(rows: int, fused: Any) -> Any:
    def linear_silu_and_mul(
        x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        if x.shape[0] >= rows:
            return ops.silu_and_mul(ops.linear(x, weight, bias))
        return fused(x, weight, bias)

    return linear_silu_and_mul


@functools.cache
def load_attention_kernel(path: str) -> Any:
    """另一个 ``triton_kernels.py`` 里的 ``_decode_partial_kernel``：参数要和现在的调用对得上。"""
    spec = importlib.util.spec_from_file_location("attention_from_file", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._decode_partial_kernel


@contextmanager
def patched(variant: Variant) -> Iterator[None]:
    """``variant`` 里给了的那几样换掉，别的形状、别的批大小照旧；退出时换回原来的函数。"""
    tiles, pick = triton_attn.decode_tiles_cuda, triton_linear.pick_config
    fused, silu_config = model_utils.linear_silu_and_mul, triton_linear.SILU_CONFIG
    store_inside = TritonAttnBackend.forward_norm_rope
    partial = triton_attn._decode_partial_kernel
    row_elements, sum_block = ops.triton_ops.ROW_ELEMENTS, triton_linear._SUM_BLOCK

    def decode_tiles(bs: int, num_kv_heads: int) -> tuple[int, dict[str, int]]:
        programs = bs * num_kv_heads
        chosen = programs == SMALL if variant.exactly_64 else programs < SMALL
        if variant.attention is not None and chosen:
            return variant.attention[0], dict(variant.attention[1])
        return tiles(bs, num_kv_heads)

    def pick_config(m: int, n: int, k: int, num_sms: int = 132) -> LinearConfig:
        if variant.gemv_long_k is not None and m == 1 and k > variant.gemv_long_k.block_k:
            return variant.gemv_long_k
        if variant.rows_wide is not None and m > 1 and n > k:
            return variant.rows_wide
        if variant.rows_narrow is not None and m > 1 and n <= k:
            return variant.rows_narrow
        return pick(m, n, k, num_sms)

    triton_attn.decode_tiles_cuda, triton_linear.pick_config = decode_tiles, pick_config
    if variant.silu_apart_from is not None:
        model_utils.linear_silu_and_mul = _silu_apart(variant.silu_apart_from, fused)
    triton_linear.SILU_CONFIG = variant.gate_silu or silu_config
    if variant.store_apart:  # 基类的写法：归一化和 RoPE 一个 kernel，写 KV 另一个
        TritonAttnBackend.forward_norm_rope = BaseAttnBackend.forward_norm_rope  # type: ignore[method-assign]
    if variant.attention_from is not None:
        triton_attn._decode_partial_kernel = load_attention_kernel(variant.attention_from)
    ops.triton_ops.ROW_ELEMENTS = variant.row_elements or row_elements
    triton_linear._SUM_BLOCK = variant.sum_block or sum_block
    try:
        yield
    finally:
        ops.triton_ops.ROW_ELEMENTS, triton_linear._SUM_BLOCK = row_elements, sum_block
        triton_attn.decode_tiles_cuda, triton_linear.pick_config = tiles, pick
        model_utils.linear_silu_and_mul, triton_linear.SILU_CONFIG = fused, silu_config
        TritonAttnBackend.forward_norm_rope = store_inside  # type: ignore[method-assign]
        triton_attn._decode_partial_kernel = partial


def run(
    model: str, dtype: str, variants: dict[str, Variant], batch_sizes: list[int], context: int,
    steps: int, runs: int,
) -> dict[str, Any]:  # fmt: skip
    """每一组按 ``名字 + 倒过来的名字`` 的顺序各量两次：``{名字: [{批大小: 毫秒/步}, ...]}``。"""
    device = pick_device()
    names = list(variants)
    rows, max_seq_len = max(batch_sizes), context + steps + 8
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for name in names + names[::-1]:
        with patched(variants[name]):
            # KV 池正好开页表的格子数，不随别的进程占着多少显存变（同 profile.run）
            llm = LLM(
                model, device=device, dtype=dtype_from_str(dtype),
                dummy_weights=not has_weight_files(model), max_running_reqs=rows,
                max_seq_len=max_seq_len, num_pages=rows * max_seq_len,
            )  # fmt: skip
            try:
                row = {
                    bs: offline.decode_latency(llm, bs, context, steps, runs)["median"]
                    for bs in batch_sizes
                }
            finally:
                llm.shutdown()
        results[name].append(row)
        print(name, {bs: round(ms, 4) for bs, ms in row.items()}, flush=True)
        del llm
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return {"device": str(device), "model": model, "context": context, "steps": steps,
            "runs": runs, "ms_per_step": results}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="小模型、很少的步数，只走一遍流程")
    ap.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    ap.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--context", type=int, default=512, help="每个请求的上下文长度（token）")
    ap.add_argument("--out", help="结果写到这个 JSON 文件")
    ap.add_argument(
        "--attention-from", metavar="FILE",
        help="另一个 triton_kernels.py：多量一组 attention-from-file，decode 注意力用它的 kernel",
    )  # fmt: skip
    ns = ap.parse_args(argv)
    variants = {name: VARIANTS[name] for name in ns.variants}
    if ns.attention_from:
        variants["attention-from-file"] = Variant(attention_from=ns.attention_from)
    if ns.check:
        first_two = dict(list(variants.items())[:2])
        result = run("models/tiny-qwen3", "float32", first_two, [1], 16, 4, 1)
    else:
        result = run(
            "models/qwen3-0.6b-shape", "bfloat16", variants, ns.batch_sizes, ns.context, 64, 5
        )
    if ns.out:
        save_results(result, ns.out)
    print(json.dumps(result["ms_per_step"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
