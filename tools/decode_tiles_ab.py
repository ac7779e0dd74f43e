"""只有几个请求时的 decode 注意力分块，放进整步 decode 里比（第 19 章第十三处的表由它量出）。

``tune_kernels.py`` 把 28 层注意力单独连着跑；这里量的是真实的一步：每一组分块各建一个
``LLM``（CUDA Graph 在建的时候就录好了，换分块就得重建），只替换程序数少于 64（batch × KV 头数）
时 ``decode_tiles_cuda`` 的返回值，用基准测试的 ``decode_latency`` 量几个小批次。几组参数按
"去一遍、回一遍"的顺序各量两次，抵消机器随时间的漂移::

    python tools/decode_tiles_ab.py --out /tmp/tiles.json

没有 GPU 时 ``--check`` 用内嵌的小模型、很少的步数把流程走一遍（CPU 上不走这个函数，量出的数
没有意义），只说明脚本能跑、跑完换回了原来的函数。
"""

from __future__ import annotations

import argparse
import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from minisgl.attention import triton_attn
from minisgl.benchmark import offline, save_results
from minisgl.engine import has_weight_files
from minisgl.llm import LLM
from minisgl.utils import dtype_from_str, pick_device

SMALL = 64  # 程序数少于它时换分块（和 decode_tiles_cuda 里"只有几个请求"的那一档一致）
# 名字 → (段数, tiles)；None 是不换（现在的 decode_tiles_cuda）
VARIANTS: dict[str, tuple[int, dict[str, int]] | None] = {
    "now": None,
    "16s-8w2s": (16, {"BLOCK_N": 64, "num_warps": 8, "num_stages": 2}),
    "16s-4w4s": (16, {"BLOCK_N": 64, "num_warps": 4, "num_stages": 4}),
    "8s-4w4s": (8, {"BLOCK_N": 64, "num_warps": 4, "num_stages": 4}),
    "8s-8w2s": (8, {"BLOCK_N": 64, "num_warps": 8, "num_stages": 2}),
    "4s-4w4s": (4, {"BLOCK_N": 64, "num_warps": 4, "num_stages": 4}),
}


@contextmanager
def small_batch_tiles(variant: tuple[int, dict[str, int]] | None) -> Iterator[None]:
    """程序数少于 ``SMALL`` 时让 ``decode_tiles_cuda`` 返回 ``variant``，别的批大小照旧。"""
    original = triton_attn.decode_tiles_cuda

    def patched(bs: int, num_kv_heads: int) -> tuple[int, dict[str, int]]:
        if variant is not None and bs * num_kv_heads < SMALL:
            return variant[0], dict(variant[1])
        return original(bs, num_kv_heads)

    triton_attn.decode_tiles_cuda = patched
    try:
        yield
    finally:
        triton_attn.decode_tiles_cuda = original


def run(
    model: str, dtype: str, names: list[str], batch_sizes: list[int], context: int, steps: int,
    runs: int,
) -> dict[str, Any]:  # fmt: skip
    """每一组按 ``names + 倒过来的 names`` 的顺序各量两次：``{名字: [{批大小: 毫秒/步}, ...]}``。"""
    device = pick_device()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for name in names + names[::-1]:
        with small_batch_tiles(VARIANTS[name]):
            llm = LLM(
                model, device=device, dtype=dtype_from_str(dtype),
                dummy_weights=not has_weight_files(model), max_running_reqs=max(batch_sizes),
                max_seq_len=context + steps + 8, memory_fraction=0.3,
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
    ap.add_argument("--out", help="结果写到这个 JSON 文件")
    ns = ap.parse_args(argv)
    if ns.check:
        result = run("models/tiny-qwen3", "float32", ns.variants[:2], [1], 16, 4, 1)
    else:
        result = run("models/qwen3-0.6b-shape", "bfloat16", ns.variants, ns.batch_sizes, 512, 64, 5)
    if ns.out:
        save_results(result, ns.out)
    print(json.dumps(result["ms_per_step"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
