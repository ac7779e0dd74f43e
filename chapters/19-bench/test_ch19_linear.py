"""第 19 章：小批量线性层的 Triton GEMV（``kernel/triton_linear.py``）和 ``ops.linear`` 的分派。

- 数值：float32 累加。float32 的输入和 ``F.linear`` 只差求和顺序带来的舍入（用 K·2⁻²³·Σ|x||w|
  这个先验的误差界）；bf16/fp16 的输出是精确结果就近舍入一次，误差不超过半个单位（ulp）。
  形状故意取块大小的非整数倍，M 从 1 到 16，有 bias 和没有 bias，乘加两种写法、切不切 K 都测。
- split-K：部分和按固定的顺序相加，两次运行逐位相同。
- gate_up 连着 SiLU-mul：一行时的那个 kernel 和 float64 的精确结果只差各步的舍入；几行时
  （SiLU-mul 并进合并部分和的 kernel）和分开算的两个 kernel 逐位相同。
- 分派：只有 M 小、dtype 是 bf16/fp16 且处处一致、张量连续时才走 kernel，其余都是 ``F.linear``。

不在 CUDA 上时 kernel 由 Triton 的解释器执行。解释器有两处和 GPU 不同，测试里换掉：bf16 的
``tl.dot`` 把 bf16 的位当成整数相乘（GPU 上是张量核心的 bf16 乘法、float32 累加），float32 转
bf16 时直接截断（GPU 上是就近舍入）。解释器很慢，所以这里的 N、K 都很小。
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minisgl.kernel import ops
from minisgl.layers import LinearReplicated, LinearRowParallel
from minisgl.utils.device import pick_device

DEVICE = str(pick_device())
ON_CUDA = DEVICE.startswith("cuda")
TL = ops.triton_linear
pytestmark = pytest.mark.skipif(TL is None, reason="triton is not installed")

# 小的块，让很小的 N、K 也有好几个 program、好几轮循环和好几段 split-K
SMALL = {"block_n": 16, "block_k": 32}


@pytest.fixture(autouse=True)
def interpreter_like_gpu(monkeypatch: pytest.MonkeyPatch, bf16_round_to_nearest: None) -> None:
    """解释器里 bf16 的 ``tl.dot`` 先把两边转成 float32；float32 转 bf16 就近舍入（conftest.py
    的 ``bf16_round_to_nearest``），和 GPU 一样。"""
    if ON_CUDA:
        return
    import triton.language as tl
    from triton.runtime import interpreter

    def to_f32(h):  # type: ignore[no-untyped-def]
        if h.dtype.scalar == tl.bfloat16:  # bf16 的位左移 16 位就是同一个值的 float32
            bits = (h.data.astype(np.uint32) << 16).view(np.float32)
            return interpreter.TensorHandle(bits, tl.float32)
        return h

    dot = interpreter.InterpreterBuilder.create_dot
    monkeypatch.setattr(
        interpreter.InterpreterBuilder,
        "create_dot",
        lambda self, a, b, d, *rest: dot(self, to_f32(a), to_f32(b), d, *rest),
    )


def _inputs(m: int, n: int, k: int, dtype: torch.dtype, bias: bool):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(m * 7919 + n * 31 + k)
    x = torch.randn(m, k, generator=gen).to(DEVICE, dtype)
    w = torch.randn(n, k, generator=gen).to(DEVICE, dtype)
    b = torch.randn(n, generator=gen).to(DEVICE, dtype) if bias else None
    return x, w, b


def _exact_and_sum_bound(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 的 ``F.linear(x, w, b)``，和 float32 累加时求和误差的先验界 K·2⁻²³·Σ|x||w|。"""
    xd, wd = x.double().cpu(), w.double().cpu()
    bd = b.double().cpu() if b is not None else None
    exact = F.linear(xd, wd, bd)
    magnitude = F.linear(xd.abs(), wd.abs(), bd.abs() if bd is not None else None)
    return exact, (x.shape[1] + 1) * 2.0**-23 * magnitude


def _check(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> None:
    """``got`` 和 float64 的精确结果比：float32 差不超过先验的求和误差界，bf16/fp16 差不超过
    半个 ulp（再加上 float32 累加的那一点误差）。"""
    assert got.dtype == x.dtype and got.shape == (x.shape[0], w.shape[0])
    exact, bound = _exact_and_sum_bound(x, w, b)
    if x.dtype != torch.float32:
        half_ulp = torch.finfo(x.dtype).eps / 2
        bound = bound + half_ulp * exact.abs()
    err = (got.double().cpu() - exact).abs()
    assert (err <= bound).all(), (
        f"max error {err.max():.3g}, bound there {bound[err > bound][0]:.3g}"
    )


CONFIGS = {
    "default": None,
    "sum": TL.LinearConfig(**SMALL, split_k=1, dot=False) if TL else None,
    "sum-split": TL.LinearConfig(**SMALL, split_k=3, dot=False) if TL else None,
    "dot": TL.LinearConfig(**SMALL, split_k=1, dot=True) if TL else None,
    "dot-split": TL.LinearConfig(**SMALL, split_k=4, dot=True) if TL else None,
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "k", "bias"), [(1, 40, 100, True), (5, 33, 128, False)])
def test_matches_f_linear(
    m: int, n: int, k: int, bias: bool, dtype: torch.dtype, config: str
) -> None:
    """N、K 不是块的整数倍（K=100 的最后一轮只有 4 列），K=128 时切段正好整除。"""
    x, w, b = _inputs(m, n, k, dtype, bias)
    _check(TL.linear_small_m(x, w, b, CONFIGS[config]), x, w, b)


@pytest.mark.parametrize("m", range(1, TL.MAX_M + 1) if TL else [])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_m(m: int, dtype: torch.dtype) -> None:
    """M 从 1 到 16，按形状挑的参数（M=1 逐元素乘再求和，其余 tl.dot）和强制切 K 的各一次。"""
    x, w, b = _inputs(m, 24, 72, dtype, bias=m % 2 == 0)
    _check(TL.linear_small_m(x, w, b), x, w, b)
    _check(TL.linear_small_m(x, w, b, TL.LinearConfig(**SMALL, split_k=2, dot=m > 2)), x, w, b)


def test_split_k_is_deterministic() -> None:
    """部分和按段的顺序相加（不用浮点原子加）：同样的输入两次结果逐位相同，和不切时只差舍入。"""
    x, w, b = _inputs(3, 48, 4 * 64, torch.bfloat16, bias=True)
    config = TL.LinearConfig(16, 64, split_k=4, dot=True)
    first = TL.linear_small_m(x, w, b, config)
    assert torch.equal(first, TL.linear_small_m(x, w, b, config))
    _check(first, x, w, b)


def test_rejects_what_it_cannot_do() -> None:
    x, w, _ = _inputs(2, 16, 32, torch.float32, bias=False)
    with pytest.raises(ValueError, match="M must be"):
        TL.linear_small_m(torch.zeros(TL.MAX_M + 1, 32, device=DEVICE), w)
    with pytest.raises(ValueError, match="bad shapes"):
        TL.linear_small_m(x, w[:, :16])
    with pytest.raises(ValueError, match="bias"):
        TL.linear_small_m(x, w, torch.zeros(8, device=DEVICE))


def _check_fused(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> None:
    """``silu(gate) * up`` 和 float64 的精确结果比。gate、up 在 float32 里累加（误差不超过
    ``_check`` 的先验界）再各自舍入成 x 的 dtype，SiLU 的结果、乘积又各舍入一次；gate 的误差经
    SiLU 的导数（处处 ``|silu'| < 1.1``）传下去，float32 里的 exp 和除法再多算几个 ulp。"""
    inter = w.shape[0] // 2
    assert got.dtype == x.dtype and got.shape == (x.shape[0], inter)
    exact, sum_bound = _exact_and_sum_bound(x, w)
    half = torch.finfo(x.dtype).eps / 2
    err = sum_bound + half * exact.abs()  # 累加，再舍入一次
    gate, up, d_gate, d_up = exact[:, :inter], exact[:, inter:], err[:, :inter], err[:, inter:]
    silu = F.silu(gate)
    d_silu = 1.1 * d_gate + (half + 2.0**-20) * (silu.abs() + 1.1 * d_gate)
    bound = d_silu * up.abs() + (silu.abs() + d_silu) * d_up
    bound = bound + half * (silu.abs() + d_silu) * (up.abs() + d_up)  # 乘积的舍入
    diff = (got.double().cpu() - silu * up).abs()
    worst = bound[diff > bound][0] if (diff > bound).any() else 0.0
    assert (diff <= bound).all(), f"max error {diff.max():.3g}, bound there {worst:.3g}"


FUSED_CONFIGS = {
    "default": None,
    "small": TL.LinearConfig(**SMALL, split_k=1) if TL else None,
}


@pytest.mark.parametrize("config", list(FUSED_CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("inter", "k"), [(40, 100), (33, 128), (24, 2048)])
def test_linear_silu_and_mul_matches_silu_of_the_exact_product(
    inter: int, k: int, dtype: torch.dtype, config: str
) -> None:
    """GEMV 连 SiLU-mul 的一个 kernel：和精确结果只差各步的舍入。I 不是块的整数倍；K 有不是块的
    整数倍的（最后一块带掩码），也有正好两块 1024 的。"""
    x, w, _ = _inputs(1, 2 * inter, k, dtype, bias=False)
    _check_fused(TL.linear_silu_and_mul(x, w, FUSED_CONFIGS[config]), x, w)


@pytest.mark.skipif(not ON_CUDA, reason="真实尺寸在解释器里太慢；同样的 kernel 由上一个测试核对")
def test_linear_silu_and_mul_on_the_decode_shape() -> None:
    """Qwen3-0.6B 的 gate_up（I=3072，K=1024）：误差界之内；和引擎原来的两步（GEMV、再
    ``silu_and_mul``）比，求和的顺序不一样，最多个别元素不同。"""
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(1, 1024, generator=gen).to(DEVICE, torch.bfloat16)
        w = (torch.randn(2 * 3072, 1024, generator=gen) / 32).to(DEVICE, torch.bfloat16)
        got = TL.linear_silu_and_mul(x, w)
        _check_fused(got, x, w)
        apart = ops.triton_ops.silu_and_mul(TL.linear_small_m(x, w))
        assert (got != apart).sum() <= 3


SEVERAL_ROWS = {
    "default": None,  # pick_config：tl.dot；这么小的 K 不切
    "dot-split": TL.LinearConfig(**SMALL, split_k=3, dot=True) if TL else None,
    "sum-split": TL.LinearConfig(**SMALL, split_k=2, dot=False) if TL else None,
}


@pytest.mark.parametrize("config", list(SEVERAL_ROWS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [2, 5, 16])
def test_linear_silu_and_mul_of_several_rows_equals_the_two_kernels(
    m: int, dtype: torch.dtype, config: str
) -> None:
    """几行时 SiLU 和乘放进合并部分和的 kernel：和先算 GEMV、再单独做 SiLU-mul 的两个 kernel
    逐位相同（同样的参数，切 K 和不切 K），当然也在精确结果的误差界之内。I、K 都不是块的整数倍。"""
    x, w, _ = _inputs(m, 2 * 40, 100, dtype, bias=False)
    cfg = SEVERAL_ROWS[config]
    got = TL.linear_silu_and_mul(x, w, cfg)
    apart = ops.triton_ops.silu_and_mul(TL.linear_small_m(x, w, None, cfg))
    assert torch.equal(got, apart)
    _check_fused(got, x, w)


def test_linear_silu_and_mul_rejects_what_it_cannot_do() -> None:
    x, w, _ = _inputs(2, 16, 32, torch.bfloat16, bias=False)
    with pytest.raises(ValueError, match="bad shapes"):
        TL.linear_silu_and_mul(torch.zeros(TL.MAX_M + 1, 32, device=DEVICE), w)  # 行太多
    with pytest.raises(ValueError, match="bad shapes"):
        TL.linear_silu_and_mul(x, w[:15])  # 行数是奇数，分不成 gate、up 两半
    with pytest.raises(ValueError, match="contiguous"):
        TL.linear_silu_and_mul(x.t().contiguous().t(), w)
    with pytest.raises(ValueError, match="neither splits"):
        TL.linear_silu_and_mul(x[:1], w, TL.LinearConfig(**SMALL, split_k=2))


def test_gated_mlp_fuses_a_few_tokens_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """``GatedMLP`` 在 CUDA 上、几个 token（M ≤ 16）、bf16、SiLU 时走合成的 kernel，结果就是
    ``down`` 接在它后面；更多 token、GELU、CPU 上都是原来的 ``down(act_and_mul(gate_up(x)))``。"""
    from minisgl.models.utils import GatedMLP

    fused = TL.linear_silu_and_mul
    calls = _spy(monkeypatch, "linear_silu_and_mul")
    gen = torch.Generator().manual_seed(0)
    for act in ("silu", "gelu"):
        mlp = GatedMLP(64, 48, act)
        gate_up, down = mlp.gate_up_proj, mlp.down_proj
        gate_up.weight = (torch.randn(96, 64, generator=gen) / 8).to(DEVICE, torch.bfloat16)
        down.weight = (torch.randn(64, 48, generator=gen) / 8).to(DEVICE, torch.bfloat16)
        for m in (1, 3, TL.MAX_M + 1):
            x = torch.randn(m, 64, generator=gen).to(DEVICE, torch.bfloat16)
            if ON_CUDA and act == "silu" and m <= TL.MAX_M:
                hidden = fused(x, gate_up.weight)
            else:
                hidden = mlp._act_and_mul(ops.linear(x, gate_up.weight))
            assert torch.equal(mlp.forward(x), ops.linear(hidden, down.weight))
    assert calls == ([1, 3] if ON_CUDA else [])


def test_pick_config_covers_the_sms() -> None:
    """decode 的形状（Qwen3-0.6B）：program 不少于 SM 数的一小半，没有空的 K 段。M=1 时每段 K
    恰好一块，program 超过 SM 数的 4 倍时每个 program 的行数加倍；M 大于 1、program 不到 SM 数的
    4 倍时沿 K 切，最多 4 段。"""
    for n, k in [(4096, 1024), (1024, 2048), (6144, 1024), (1024, 3072), (151936, 1024)]:
        for m in (1, 2, 4, 8, 16):
            cfg = TL.pick_config(m, n, k, num_sms=132)
            blocks = -(-n // cfg.block_n)
            assert blocks * cfg.split_k >= 128, (m, n, k, cfg)
            assert cfg.split_k * cfg.block_k <= k
            if m == 1:
                assert cfg.split_k * cfg.block_k == k and not cfg.dot
                assert (cfg.block_n == 16) == (-(-n // 8) * cfg.split_k > 4 * 132)
            elif blocks < 4 * 132:
                assert cfg.split_k == min(4, k // cfg.block_k) and cfg.dot


# ---------------------------------------------------------------- 分派


def _t(shape: tuple[int, ...], dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype)


@pytest.mark.parametrize(
    ("x", "w", "b", "fits"),
    [
        (_t((1, 64)), _t((32, 64)), None, True),
        (_t((16, 64)), _t((32, 64)), _t((32,)), True),
        (_t((4, 64), torch.float16), _t((32, 64), torch.float16), None, True),
        (_t((1, 64)), _t((96, 64)), _t((96,)), True),  # M=1：输出宽也走 kernel
        (_t((4, 64)), _t((96, 64)), None, True),  # 输出比输入宽也走 kernel
        (_t((4, 64)), _t((64, 64)), None, True),
        (_t((17, 64)), _t((32, 64)), None, False),  # 超过 MAX_M：普通的矩阵乘
        (_t((0, 64)), _t((32, 64)), None, False),
        (_t((2, 3, 64)), _t((32, 64)), None, False),  # 三维的 x
        (_t((4, 64), torch.float32), _t((32, 64), torch.float32), None, False),
        (_t((4, 64)), _t((32, 64), torch.float16), None, False),  # dtype 不一致
        (_t((4, 64)), _t((32, 64)), _t((32,), torch.float32), False),
        (_t((4, 128))[:, ::2], _t((32, 64)), None, False),  # 不连续
        (_t((4, 64)), _t((64, 32)).t(), None, False),
    ],
)
def test_dispatch_only_where_intended(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, fits: bool
) -> None:
    assert ops._small_m_kernel_fits(x, w, b) is fits


def _spy(monkeypatch: pytest.MonkeyPatch, name: str = "linear_small_m") -> list[int]:
    """把 ``triton_linear`` 里的 kernel 函数换成记下每次 M 的包装，返回这份记录。"""
    calls: list[int] = []
    kernel = getattr(TL, name)

    def spy(x, *args):  # type: ignore[no-untyped-def]
        calls.append(x.shape[0])
        return kernel(x, *args)

    monkeypatch.setattr(TL, name, spy)
    return calls


def test_layers_call_the_kernel_on_cuda_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """列并行、复制的层（``forward``）和行并行的 ``forward_local`` 都经过 ``ops.linear``：CUDA 上
    M 小时都调用 kernel，M 大时和 CPU 上都是 ``F.linear``。结果都对。"""
    calls = _spy(monkeypatch)
    narrow, wide = LinearReplicated(64, 48, bias=True), LinearReplicated(64, 96)
    row = LinearRowParallel(64, 40)
    for layer in (narrow, wide, row):
        layer.weight = torch.randn(layer.weight.shape).to(DEVICE, torch.bfloat16)
    narrow.bias = torch.randn(48).to(DEVICE, torch.bfloat16)
    for m in (1, 3, 40):
        x = torch.randn(m, 64).to(DEVICE, torch.bfloat16)
        outputs = [
            (narrow.forward(x), narrow),
            (wide.forward(x), wide),
            (row.forward_local(x), row),
        ]
        for got, layer in outputs:
            bias = layer.bias if layer is not row else None
            if ON_CUDA and ops._small_m_kernel_fits(x, layer.weight, bias):
                _check(got, x, layer.weight, bias)
            else:
                assert torch.equal(got, F.linear(x, layer.weight, bias))
    assert calls == ([1, 1, 1, 3, 3, 3] if ON_CUDA else [])


@pytest.mark.skipif(not ON_CUDA, reason="CUDA Graph")
def test_capturable_in_a_cuda_graph() -> None:
    """decode 被录进 CUDA Graph：kernel 里没有同步，输出和部分和的分配来自图的内存池。"""
    x, w, b = _inputs(2, 1024, 2048, torch.bfloat16, bias=True)
    config = TL.LinearConfig(16, 256, split_k=4, dot=True)
    eager = TL.linear_small_m(x, w, b, config)  # 先编译，录制时不能编译
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = TL.linear_small_m(x, w, b, config)
    graph.replay()
    assert torch.equal(out, eager)
