"""实验：几行（M = 2～16）的线性层在一个程序里切 K，不再启动合并部分和的 kernel。

第 19 章第二十八处量过它。

``triton_linear`` 几行时沿 K 切成几段、每段一个程序，各写一份 float32 的部分和，再由第二个
kernel 合并：batch 8 每层比 batch 1 多两个合并的 kernel（qkv、gate_up）。这里换一种切法：一个程序
读 W 的 ``BLOCK_N`` 行、整个 K，K 切成 ``SPLIT`` 段，排成三维的 ``tl.dot``（每段一份累加，
4 个 warp、4 段时正好一个 warp 一段），最后在程序里沿段求和、直接写结果。gate_up 时一个程序的
``BLOCK_N`` 行前一半是 gate、后一半是同样位置的 up，求和后就地做 SiLU-mul。合并的 kernel
一个也不要了，代价是程序少了：qkv 256 个、gate_up 384 个、o_proj 和 down 只有 64 个。

GPU 上逐个形状单独计时（CUDA Graph 里连着跑，权重复制到比 L2 大，同 ``tune_kernels.py``），
和包里现在的写法比::

    python tools/linear_in_program.py --out linear-in-program.h100.json

整步的对照是 ``decode_tiles_ab.py`` 的 ``in-program-qkv``、``in-program-all`` 两组，参数取自
``CONFIGS``。没有 GPU 时 ``--check`` 用 Triton 的解释器在小形状上核对结果。
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from minisgl.kernel import ops  # 先导入它：没有 GPU 时它打开 Triton 的解释器
from minisgl.kernel.triton_linear import LinearConfig
from minisgl.kernel.triton_ops import dependent_launch, gdc_launch_dependents, gdc_wait, silu_mul

import triton  # isort: skip
import triton.language as tl  # isort: skip

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_kernels import PROJECTIONS, graph_time_us  # noqa: E402

# 每个投影几行时的参数（block_n, block_k, split_k, num_warps, num_stages）：H100 上单独计时
# 最快的一组
CONFIGS = {
    "qkv": LinearConfig(16, 256, 4, 4, 1),
    "o_proj": LinearConfig(16, 256, 8, 8, 1),
    "gate_up": LinearConfig(16, 256, 2, 2, 2),
    "down": LinearConfig(16, 128, 8, 8, 2),
}
# 单独计时时试的几组：输出比输入宽的（qkv、gate_up）和不比输入宽的（o_proj、down）
WIDE = [LinearConfig(16, 256, 4, 4, 1), LinearConfig(16, 128, 4, 4, 2),
        LinearConfig(16, 128, 8, 8, 1), LinearConfig(16, 512, 2, 2, 1),
        LinearConfig(16, 256, 2, 2, 2), LinearConfig(32, 256, 4, 4, 1),
        LinearConfig(32, 128, 8, 8, 1)]  # fmt: skip
NARROW = [LinearConfig(16, 256, 4, 4, 2), LinearConfig(16, 128, 8, 8, 2),
          LinearConfig(16, 256, 8, 8, 1), LinearConfig(16, 512, 2, 2, 2),
          LinearConfig(16, 512, 4, 4, 1), LinearConfig(16, 128, 16, 16, 1)]  # fmt: skip


@triton.jit(do_not_specialize=["M"])
def _linear_in_program_kernel(
    X, W, Y, M, N, K, stride_xm, stride_wn, stride_ym,
    SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SILU: tl.constexpr, PRECISE: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    r = tl.arange(0, BLOCK_N)
    HALF: tl.constexpr = BLOCK_N // 2
    if SILU:  # 前一半行是 gate j，后一半是同样位置的 up（第 N + j 行）
        j = pid * HALF + (r % HALF)
        w_rows = tl.where(r < HALF, j % N, N + j % N).to(tl.int64)
    else:  # 越界的行读第 (行号 % N) 行代替，写回时丢掉
        w_rows = ((pid * BLOCK_N + r) % N).to(tl.int64)
    rm = tl.arange(0, BLOCK_M)
    chunk = tl.multiple_of(K // SPLIT, BLOCK_K)  # 每段的长度；K 是 SPLIT × BLOCK_K 的整数倍
    kk = tl.arange(0, SPLIT)[:, None, None] * chunk + tl.arange(0, BLOCK_K)[None, None, :]
    w_ptrs = W + w_rows[None, :, None] * stride_wn + kk  # (SPLIT, BLOCK_N, BLOCK_K)
    x_ptrs = X + rm[None, :, None] * stride_xm + kk  # (SPLIT, BLOCK_M, BLOCK_K)
    x_mask = (rm < M)[None, :, None]
    acc = tl.zeros((SPLIT, BLOCK_M, BLOCK_N), dtype=tl.float32)
    if PDL:  # 同 _linear_kernel：先发出第一块权重的读，再等前一个 kernel 写完 x
        gdc_launch_dependents()
    w = tl.load(w_ptrs)
    if PDL:
        gdc_wait()
    for k in range(0, chunk, BLOCK_K):
        if k > 0:
            w = tl.load(w_ptrs + k)
        x = tl.load(x_ptrs + k, mask=x_mask, other=0.0)
        acc = tl.dot(x, tl.trans(w, (0, 2, 1)), acc)
    out = tl.sum(acc, axis=0)
    dtype = Y.dtype.element_ty
    if SILU:  # (BLOCK_M, BLOCK_N) 的后一半列是前一半的 up：拆成两份，各自舍入再做 SiLU-mul
        gate, up = tl.split(tl.permute(tl.reshape(out.to(dtype), (BLOCK_M, 2, HALF)), (0, 2, 1)))
        y = silu_mul(gate, up, PRECISE)
        rn = pid * HALF + tl.arange(0, HALF)
    else:
        y = out.to(dtype)
        rn = pid * BLOCK_N + r
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(Y + rm[:, None] * stride_ym + rn[None, :], y, mask=mask)


def linear_in_program(
    x: torch.Tensor, weight: torch.Tensor, config: LinearConfig, silu: bool = False
) -> torch.Tensor:
    """``F.linear(x, weight)``（``silu`` 时再做 SiLU-mul，weight 是合并的 gate_up），一个 kernel。

    x 是 ``(M, K)``、``M <= 16``；K 要是 ``split_k × block_k`` 的整数倍，``split_k`` 是 2 的幂。"""
    m, k = x.shape
    n = weight.shape[0] // (2 if silu else 1)
    if m > 16 or k % (config.split_k * config.block_k) or x.stride(-1) != 1:
        raise ValueError(f"unsupported: x {tuple(x.shape)}, weight {tuple(weight.shape)}, {config}")
    y = torch.empty(m, n, device=x.device, dtype=x.dtype)
    outputs = config.block_n // 2 if silu else config.block_n  # 每个程序写几列
    _linear_in_program_kernel[(triton.cdiv(n, outputs),)](
        x, weight, y, m, n, k, x.stride(0), weight.stride(0), y.stride(0),
        SPLIT=config.split_k, BLOCK_M=16, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        SILU=silu, PRECISE=x.is_cuda, num_warps=config.num_warps, num_stages=config.num_stages,
        enable_fp_fusion=False, **dependent_launch(x),
    )  # fmt: skip
    return y


def projection_name(weight: torch.Tensor) -> str | None:
    """按权重的形状认出是 Qwen3-0.6B 的哪个投影（别的形状，比如 lm_head，返回 None）。"""
    shapes = {shape: name for name, shape in PROJECTIONS.items()}
    return shapes.get(tuple(weight.shape))


def _now(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """包里现在的写法（几行时切 K、再合并；gate_up 的合并里做 SiLU-mul）。"""
    if name == "gate_up":
        return lambda x, w: ops.linear_silu_and_mul(x, w, None)
    return lambda x, w: ops.linear(x, w)


def reference(x: torch.Tensor, weight: torch.Tensor, silu: bool) -> torch.Tensor:
    y = F.linear(x.float(), weight.float())
    if not silu:
        return y
    gate, up = y.chunk(2, dim=-1)
    return F.silu(gate.to(x.dtype).float()) * up.to(x.dtype).float()


def time_all(ms: tuple[int, ...] = (1, 8)) -> dict[str, Any]:
    rows = []
    for name, (n, k) in PROJECTIONS.items():
        copies = max(8, (256 << 20) // (n * k * 2))
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.05
                   for _ in range(copies)]  # fmt: skip
        silu, now = name == "gate_up", _now(name)
        for m in ms:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ref = reference(x, weights[0], silu)
            row: dict[str, Any] = {
                "name": name, "m": m,
                "now_us": graph_time_us([functools.partial(now, x, w) for w in weights]),
                "now_err": float((now(x, weights[0]).float() - ref).abs().max()),
                "in_program": [],
            }  # fmt: skip
            for c in WIDE if n > k else NARROW:
                if k % (c.split_k * c.block_k):
                    continue
                err = (linear_in_program(x, weights[0], c, silu).float() - ref).abs().max()
                calls = [functools.partial(linear_in_program, x, w, c, silu) for w in weights]
                us = graph_time_us(calls)
                row["in_program"].append({"config": c._asdict(), "us": us, "err": float(err)})
            row["in_program"].sort(key=lambda d: d["us"])
            best = row["in_program"][0]
            print(f"{name} M={m}：现在 {row['now_us']:.2f} µs，程序内切 K 最快 {best['us']:.2f} µs "
                  f"{tuple(best['config'].values())[:5]}", flush=True)  # fmt: skip
            rows.append(row)
        del weights
    return {"device": torch.cuda.get_device_name(), "rows": rows}


def check() -> int:
    """解释器上核对：float32，几种行数、切段和 SiLU-mul。"""
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    for m in (1, 3, 8, 16):
        for silu in (False, True):
            for c in (LinearConfig(16, 32, 4, 4, 1), LinearConfig(32, 32, 2, 2, 2)):
                x = torch.randn(m, 256, generator=gen)
                w = torch.randn(80, 256, generator=gen)
                got = linear_in_program(x, w, c, silu)
                worst = max(worst, float((got - reference(x, w, silu)).abs().max()))
    print(f"最大误差 {worst:.3g}")
    return 0 if worst < 1e-2 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="没有 GPU 时在解释器上核对结果")
    ap.add_argument("--out", help="结果写到这个 JSON 文件")
    ns = ap.parse_args(argv)
    if ns.check:
        return check()
    from minisgl.benchmark import save_results

    result = time_all()
    if ns.out:
        save_results(result, ns.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
