"""不用 GPU，把包里的每个 Triton kernel 按 GPU 上的参数编译成 Hopper（sm_90）的机器码。

CPU 上的测试用 Triton 的解释器跑这些 kernel：算得对不对测得到，可解释器不编译。只在 GPU 上走的
分支（依赖启动的 ``gdc_wait``、``PRECISE`` 时的 libdevice、GPU 上挑的分块）和只有编译器才报的错
（类型不合、编译器不支持的写法）在解释器里都看不见，要等到有 GPU 的机器上才暴露。

这个脚本关掉解释器（``TRITON_INTERPRET=0``，必须在导入 triton 之前），在 CPU 的小张量上调用包里
发出 kernel 的各个函数，把每一次启动记下来、不真的启动；再把 GPU 上才打开的编译期开关打开
（``PDL``、``PRECISE``），decode 注意力和 extend 换成 GPU 上挑的分块，逐个交给 ``triton.compile``
编译到 sm_90。每一个都编译出 cubin，就说明 GPU 上不会在编译这一步出错。Triton 自带 ptxas，
不需要 CUDA 驱动。最后一行是共享内存用得最多的那个启动：每一代 GPU 给一个程序的共享内存有上限
（H100 是 227 KB，A100 是 163 KB，RTX 30、40 系是 99 KB），超过了就启动不了::

    python tools/compile_for_gpu.py
    python tools/compile_for_gpu.py --arch 80   # A100、RTX 30 系那一代：没有依赖启动，PDL 关着

编译的是每个 kernel 的通用版本：GPU 上的 JIT 还会按指针是否 16 字节对齐、整数是否等于 1 再特化，
那些版本和这里的只差几处寻址的写法。
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "0"  # 要的是编译器；minisgl 在导入 triton 之前看这个变量
os.environ.setdefault("MINISGL_DEVICE", "cpu")

import argparse
import inspect
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

from minisgl.attention import triton_attn
from minisgl.kernel import triton_linear, triton_ops

CUDA = torch.device("cuda")  # 只用来让包里按设备挑参数的函数挑 GPU 的那一组，不分配显存
HOPPER = 90  # 默认编译给 H100 / H200；更早的架构（--arch 80、86、89）没有依赖启动
# 启动时的选项（其余关键字参数都是 kernel 的参数）
OPTIONS = ("num_warps", "num_stages", "enable_fp_fusion")


# GPU 上才打开的编译期开关（CPU 上调用时它们都是 False）。依赖启动只在 Hopper 起才有
def gpu_only(arch: int) -> dict[str, bool]:
    return {"PDL": arch >= HOPPER, "PRECISE": True}


_TYPES = {
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.int32: "i32",
    torch.int64: "i64",
}
_DTYPES = {name: dtype for dtype, name in _TYPES.items()}


def _constexprs(kernel: JITFunction) -> set[str]:
    return {p.name for p in kernel.params if p.is_constexpr}


@dataclass(frozen=True)
class Launch:
    """记下来的一次启动：哪个 kernel、按名字的参数（张量换成了类型）、启动选项。"""

    kernel: JITFunction
    params: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, Any], ...]

    @property
    def name(self) -> str:
        return self.kernel.fn.__name__

    def with_values(self, params: dict[str, Any], options: dict[str, Any]) -> Launch:
        """换掉其中几个参数和选项（只换原来就有的参数）。"""
        mine = dict(self.params)
        mine.update({k: v for k, v in params.items() if k in mine})
        merged = {**dict(self.options), **options}
        return replace(self, params=tuple(mine.items()), options=tuple(merged.items()))

    def for_gpu(self, arch: int) -> Launch:
        """GPU 上才打开的开关（``gpu_only``）按架构设好，没传、用默认值的也算。"""
        params, switches = dict(self.params), gpu_only(arch)
        params.update({k: v for k, v in switches.items() if k in _constexprs(self.kernel)})
        return replace(self, params=tuple(params.items()))

    def describe(self) -> str:
        """名字、第一个张量参数的类型（看得出是哪种 dtype 的那一份）、constexpr 参数和启动选项。"""
        const = _constexprs(self.kernel)
        dtype = next(v for k, v in self.params if k not in const and str(v).startswith("*"))
        values = [f"{k}={v}" for k, v in self.params if k in const]
        values += [f"{k}={v}" for k, v in self.options]
        return f"{self.name}[{dtype[1:]}]({', '.join(values)})"


def _type_of(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "*" + _TYPES[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"cannot type a kernel argument {value!r}")


@contextmanager
def recorded_launches() -> Iterator[list[Launch]]:
    """这段时间里 ``kernel[grid](...)`` 只记下参数，不启动（CPU 上也没有可以启动的设备）。"""
    launches: list[Launch] = []
    real = JITFunction.run

    def record(self: JITFunction, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        names = [p.name for p in self.params]
        values = dict(zip(names, args)) | {k: v for k, v in kwargs.items() if k in names}
        const = _constexprs(self)
        params = tuple(
            (name, values[name] if name in const else _type_of(values[name]))
            for name in names
            if name in values
        )
        options = tuple((k, v) for k, v in kwargs.items() if k in OPTIONS)
        launches.append(Launch(self, params, options))

    JITFunction.run = record  # type: ignore[method-assign]
    try:
        yield launches
    finally:
        JITFunction.run = real  # type: ignore[method-assign]


def compile_launch(launch: Launch, arch: int = HOPPER) -> Any:
    """给 sm_``arch`` 编译一次启动，返回 Triton 的编译结果（``asm["cubin"]`` 是机器码，
    ``metadata.shared`` 是要的共享内存）。没传的 constexpr 参数用 kernel 定义里的默认值。"""
    params = dict(launch.params)
    defaults = inspect.signature(launch.kernel.fn).parameters
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    for p in launch.kernel.params:  # 按 kernel 的参数顺序
        if p.is_constexpr:
            signature[p.name] = "constexpr"
            constexprs[p.name] = params.get(p.name, defaults[p.name].default)
        else:
            signature[p.name] = params[p.name]
    source = ASTSource(fn=launch.kernel, signature=signature, constexprs=constexprs)
    target = GPUTarget("cuda", arch, 32)
    return triton.compile(source, target=target, options=dict(launch.options))


# ---------------------------------------------------------------- 在 CPU 上调用包里的函数


def _calls(dtype: torch.dtype) -> None:
    """包里每个发出 kernel 的函数调用一遍（Qwen3-0.6B 的头数和 head_dim，张量都很小）。"""
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int, dt: torch.dtype = dtype) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(dt)

    tokens, hq, hkv, d, hidden = 4, 16, 8, 128, 1024
    x, w = randn(tokens, hidden), randn(hidden)
    triton_ops.rmsnorm(x, w, 1e-6)
    triton_ops.rmsnorm(x, w, 1e-6, residual=randn(tokens, hidden))
    positions = torch.arange(tokens, dtype=torch.int32)
    cos_sin = torch.randn(64, d, generator=gen)
    q, k, v = randn(tokens, hq * d), randn(tokens, hkv * d), randn(tokens, hkv * d)
    triton_ops.apply_rope_inplace(positions, q, k, cos_sin, d)
    qw, kw = randn(d), randn(d)
    triton_ops.qk_norm_rope_inplace(positions, q, k, qw, kw, 1e-6, cos_sin, d)
    k_cache, v_cache = randn(32, hkv, d), randn(32, hkv, d)
    slots = torch.arange(tokens, dtype=torch.int32)
    triton_ops.qk_norm_rope_store(
        positions, q, k, v, qw, kw, 1e-6, cos_sin, d, k_cache, v_cache, slots
    )
    triton_ops.store_cache(k_cache, v_cache, slots, k, v)
    for rows in (1, 64, 512):  # SiLU-mul 按行数分块的三档
        triton_ops.silu_and_mul(randn(rows, 2 * 64))
    for m in (1, 2, 8):  # GEMV：M = 1 逐元素乘加，M > 1 用 tl.dot；四个投影切不切 K 各有
        xs = randn(m, hidden)
        for n, k_dim in ((4096, 1024), (1024, 2048), (6144, 1024), (1024, 3072)):
            triton_linear.linear_small_m(randn(m, k_dim), randn(n, k_dim))
        triton_linear.linear_small_m(xs, randn(48, hidden), randn(48))  # 带 bias
        triton_linear.linear_silu_and_mul(xs, randn(2 * 3072, hidden))  # gate_up 连 SiLU-mul
    page_table = torch.arange(2 * 16, dtype=torch.int32).view(2, 16)
    rows = torch.tensor([0, 1], dtype=torch.int32)
    pool_k, pool_v = randn(32, hkv, d), randn(32, hkv, d)
    triton_attn.decode_attention(randn(2, hq, d), pool_k, pool_v, page_table, rows,
                                 torch.tensor([5, 9], dtype=torch.int32))  # fmt: skip
    cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    cached = torch.tensor([2, 0], dtype=torch.int32)
    block_m = triton_attn.extend_tiles(torch.device("cpu"), dtype)["BLOCK_M"]
    work = triton_attn.extend_work([3, 4], [2, 0], block_m)
    triton_attn.extend_attention(randn(7, hq, d), pool_k, pool_v, page_table, rows, cu, cached,
                                 torch.tensor(work, dtype=torch.int32).view(-1, 2))  # fmt: skip


def _decode_tiles(bs: int) -> tuple[int, dict[str, int]]:
    return triton_attn.decode_tiles_cuda(bs, 8)  # Qwen3-0.6B 的 8 个 KV 头


def _split_options(tiles: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """分块的字典拆成 kernel 的参数和启动选项（warp 数、流水级数）。"""
    params = dict(tiles)
    return params, {k: params.pop(k) for k in ("num_warps", "num_stages") if k in params}


def _gpu_tiles(launch: Launch) -> list[Launch]:
    """注意力在 GPU 上换用另一套分块（``triton_attn`` 里按设备挑）：extend 用 ``extend_tiles``
    给 CUDA 挑的那组，16 位的 decode 用 ``decode_tiles_cuda`` 按批大小的每一档。其余 kernel 的
    参数和设备无关，原样编译。"""
    q = dict(launch.params).get("Q")
    if q is None:
        return [launch]
    dtype = _DTYPES[q[1:]]
    if launch.name == "_extend_kernel":
        return [launch.with_values(*_split_options(triton_attn.extend_tiles(CUDA, dtype)))]
    decode = ("_decode_partial_kernel", "_decode_reduce_kernel")
    if launch.name not in decode or dtype.itemsize != 2:  # decode_attention 只给 16 位的挑分块
        return [launch]
    variants = []
    for splits, tiles in {repr(c): c for c in map(_decode_tiles, (1, 8, 16, 64, 256))}.values():
        params, options = _split_options(tiles)
        if launch.name == "_decode_reduce_kernel":  # 合并只看段数；不切段时没有这一步
            if splits == 1:
                continue
            params, options = {}, {}
        variants.append(launch.with_values({"NUM_SPLITS": splits, **params}, options))
    return variants


def gpu_launches(arch: int = HOPPER) -> list[Launch]:
    """GPU 上会编译的那些启动（去掉重复的）：bf16 和 float32 各调用一遍（fp16 的代码和 bf16
    的一样，只差类型）。"""
    with recorded_launches() as launches:
        for dtype in (torch.bfloat16, torch.float32):
            _calls(dtype)
    unique: dict[str, Launch] = {}
    for launch in launches:
        for variant in _gpu_tiles(launch.for_gpu(arch)):
            unique.setdefault(repr((variant.name, variant.params, variant.options)), variant)
    return list(unique.values())


def package_kernels() -> set[str]:
    """包里定义的 kernel（名字以 ``_kernel`` 结尾的 ``@triton.jit`` 函数）。"""
    from minisgl.attention import triton_kernels

    modules = (triton_ops, triton_linear, triton_kernels)
    return {
        name
        for module in modules
        for name, value in vars(module).items()
        if isinstance(value, JITFunction) and name.endswith("_kernel")
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="只列出要编译的启动，不编译")
    ap.add_argument("--arch", type=int, default=HOPPER, help="sm_几：90（默认）、80、86、89……")
    ns = ap.parse_args(argv)
    launches = gpu_launches(ns.arch)
    missing = package_kernels() - {launch.name for launch in launches}
    if missing:
        print(f"no launch recorded for {sorted(missing)}: add a call to _calls", file=sys.stderr)
        return 1
    if ns.list:
        print("\n".join(launch.describe() for launch in launches))
        return 0
    failed, shared = 0, []
    for launch in launches:
        start = time.perf_counter()
        try:
            compiled = compile_launch(launch, ns.arch)
        except Exception as e:  # 编译器的错误各种各样：记下是哪一个，接着编译别的
            failed += 1
            print(f"FAILED {launch.describe()}: {type(e).__name__}: {e}", flush=True)
            continue
        size, seconds = len(compiled.asm["cubin"]), time.perf_counter() - start
        print(f"ok {launch.describe()}: {size} bytes, {seconds:.1f} s", flush=True)
        shared.append((compiled.metadata.shared, launch.describe()))
    print(f"{len(launches) - failed}/{len(launches)} launches compiled for sm_{ns.arch}")
    if shared:  # 共享内存用得最多的那个：放得进这一代 GPU 每个程序的上限，才启动得了
        most, which = max(shared)
        print(f"most shared memory: {most} bytes, {which}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
