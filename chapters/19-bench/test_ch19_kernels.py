"""第 19 章：合并的小 kernel 和 ``ops.py`` 的 PyTorch 写法（规格）逐位相同。

- ``qk_norm_rope_inplace``：q_norm、k_norm、RoPE 一次启动，等于分开的 rmsnorm、rmsnorm、RoPE；
- ``silu_and_mul``：一个 kernel，舍入和 ``F.silu(gate) * up`` 一样（silu 在 float32 里算、转回、
  乘 up 再转回）；
- ``store_cache``：K、V 一次启动写进缓存；
- 注意力层：合并的路径和分开的三步给出同样的 q、k、v。

不在 CUDA 上时 kernel 由 Triton 的解释器执行（和包里一样挑设备）。解释器把 float32 转 bfloat16
时直接截断，GPU 上是就近舍入（round-to-nearest-even）：测试里把解释器的这一步换成就近舍入，
和 GPU 一致。

RMSNorm 的方差是一个求和，求和的顺序不同（numpy 的、PyTorch 的、GPU 上的归约树），float32 的
结果就可能差最后一位。所以"和 PyTorch 逐位相同"的比较用求和没有舍入的输入（0.25 的整数倍），
其余的舍入都还在；任意的随机输入则和分开的 Triton kernel 逐位相同、和 PyTorch 只差舍入。
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minisgl.attention import BaseAttnBackend, TritonAttnBackend, prepare_batch
from minisgl.attention import base as attn_base
from minisgl.attention.base import QKNormRope
from minisgl.core import Batch, Req, SamplingParams
from minisgl.kernel import ops
from minisgl.kvcache import MHAKVCache
from minisgl.layers import AttentionLayer, RMSNorm
from minisgl.layers import attention as attention_module
from minisgl.models.config import RotaryConfig
from minisgl.utils.device import pick_device

DEVICE = str(pick_device())
ON_CUDA = DEVICE.startswith("cuda")
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
T = ops.triton_ops
pytestmark = [
    pytest.mark.skipif(T is None, reason="triton is not installed"),
    pytest.mark.usefixtures("bf16_round_to_nearest"),  # conftest.py：解释器里就近舍入，同 GPU
]


def _torch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "triton_ops", None)


def _values(shape: tuple[int, ...], gen: torch.Generator, exact: bool) -> torch.Tensor:
    """``exact``：0.25 的整数倍（|x| <= 4），平方和按任何顺序加都没有舍入。"""
    if exact:
        return torch.randint(-16, 17, shape, generator=gen).float() / 4
    return torch.randn(shape, generator=gen) * 3


def _case(tokens: int, hq: int, hk: int, d: int, rot: int, dtype: torch.dtype, exact: bool):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(tokens * 1000 + d + rot)
    qkv = _values((tokens, (hq + 2 * hk) * d), gen, exact).to(DEVICE, dtype)
    qw = (1 + torch.randn(d, generator=gen) / 4).to(DEVICE, dtype)
    kw = (1 + torch.randn(d, generator=gen) / 4).to(DEVICE, dtype)
    positions = (torch.arange(tokens) * 5 + 37).to(DEVICE)  # 不从 0 开始
    angles = torch.outer(torch.arange(512.0), torch.rand(rot // 2, generator=gen))
    cache = torch.cat((angles.cos(), angles.sin()), dim=-1).to(DEVICE)
    return qkv, qw, kw, positions, cache


def _split(qkv: torch.Tensor, hq: int, hk: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, _ = qkv.split([hq * d, hk * d, hk * d], dim=-1)  # 不连续的视图
    return q.view(-1, hq, d), k.view(-1, hk, d)


SHAPES = [  # (token 数, q 头数, k 头数, head_dim, rotary_dim)
    (1, 16, 8, 128, 128),
    (7, 16, 8, 64, 64),
    (3, 4, 2, 128, 64),  # 部分旋转：后 64 维只归一化
    (2, 2, 1, 96, 32),  # head_dim 不是 2 的幂
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_qk_norm_rope_matches_ops(
    shape: tuple[int, ...], dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens, hq, hk, d, rot = shape
    eps = 1e-6
    # 1) 随机输入：和分开的三个 Triton kernel（rmsnorm、rmsnorm、RoPE）逐位相同
    qkv, qw, kw, pos, cache = _case(tokens, hq, hk, d, rot, dtype, exact=False)
    fused, unfused = qkv.clone(), qkv.clone()
    T.qk_norm_rope_inplace(pos, *_split(fused, hq, hk, d), qw, kw, eps, cache, d)
    q, k = _split(unfused, hq, hk, d)
    T.rmsnorm(q, qw, eps, out=q)
    T.rmsnorm(k, kw, eps, out=k)
    T.apply_rope_inplace(pos, q, k, cache, d)
    assert torch.equal(fused, unfused)
    assert torch.equal(fused[:, (hq + hk) * d :], qkv[:, (hq + hk) * d :])  # v 不动
    # 2) 求和没有舍入的输入：和 PyTorch 的规格逐位相同（每一步的舍入都一样）
    qkv, qw, kw, pos, cache = _case(tokens, hq, hk, d, rot, dtype, exact=True)
    got, want = qkv.clone(), qkv.clone()
    T.qk_norm_rope_inplace(pos, *_split(got, hq, hk, d), qw, kw, eps, cache, d)
    _torch_path(monkeypatch)
    ops.qk_norm_rope_inplace(pos, *_split(want, hq, hk, d), qw, kw, eps, cache, d)
    assert torch.equal(got, want)


def test_qk_norm_rope_reference_is_the_composition() -> None:
    """CPU 上（以及不满足条件时）这个算子就是原来的三步，结果一位不差。"""
    qkv, qw, kw, pos, cache = _case(5, 4, 2, 64, 64, torch.float32, exact=False)
    qkv, pos, cache = qkv.cpu(), pos.cpu(), cache.cpu()
    qw, kw = qw.cpu(), kw.cpu()
    got, want = qkv.clone(), qkv.clone()
    ops.qk_norm_rope_inplace(pos, *_split(got, 4, 2, 64), qw, kw, 1e-6, cache, 64)
    q, k = _split(want, 4, 2, 64)
    ops.rmsnorm(q, qw, 1e-6, out=q)
    ops.rmsnorm(k, kw, 1e-6, out=k)
    ops.apply_rope_inplace(pos, q, k, cache, 64)
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
# 行数跨过 _silu_block 的两道门槛（64、512 行）：每个程序 256、512、1024 个数，最后一块都不满
@pytest.mark.parametrize("shape", [(1, 96), (7, 200), (2, 3, 40), (70, 1200), (600, 2100)])
def test_silu_and_mul_matches_ops(
    shape: tuple[int, ...], dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    gen = torch.Generator().manual_seed(sum(shape))
    x = (torch.randn(shape, generator=gen) * 4).to(DEVICE, dtype)
    got = T.silu_and_mul(x)
    wide = torch.randn(shape[0], 3 * shape[-1], generator=gen).to(DEVICE, dtype)
    got_view = T.silu_and_mul(wide[:, : shape[-1]])  # 行与行不相邻的视图
    _torch_path(monkeypatch)
    want = ops.silu_and_mul(x)
    assert got.shape == want.shape and got.is_contiguous()
    gate, up = x.chunk(2, dim=-1)
    # 规格的舍入顺序：silu 在 float32 里算、转回 dtype，再乘 up（float32 里乘）、转回
    assert torch.equal(want, (F.silu(gate.float()).to(dtype).float() * up.float()).to(dtype))
    if ON_CUDA or dtype == torch.bfloat16:
        assert torch.equal(got, want)
        assert torch.equal(got_view, ops.silu_and_mul(wide[:, : shape[-1]]))
    else:
        # 解释器的 exp 是 numpy 的，PyTorch 在 CPU 上用 SLEEF：silu 偶尔差 dtype 的最后一位，
        # 再乘 up、舍入一次，和 PyTorch 的结果相对差不超过几个 eps（float16 的 eps 约千分之一）
        g, u = gate.float().numpy(), up.float()
        silu = torch.from_numpy(g / (np.float32(1) + np.exp(-g)))
        assert torch.equal(got, (silu.to(dtype).float() * u).to(dtype))
        eps = torch.finfo(dtype).eps
        torch.testing.assert_close(got, want, rtol=4 * eps, atol=torch.finfo(dtype).tiny)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("two_dim", [False, True])
def test_store_cache_matches_ops(
    index_dtype: torch.dtype, two_dim: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    gen = torch.Generator().manual_seed(2)
    tokens, hq, hk, d, slots = 5, 4, 2, 64, 32
    qkv = torch.randn(tokens, (hq + 2 * hk) * d, generator=gen).to(DEVICE, torch.bfloat16)
    _, k, v = qkv.split([hq * d, hk * d, hk * d], dim=-1)
    if not two_dim:
        k, v = k.view(tokens, hk, d), v.view(tokens, hk, d)
    indices = torch.randperm(slots, generator=gen)[:tokens].to(DEVICE, index_dtype)
    kv = torch.randn(2, slots, hk, d, generator=gen).to(DEVICE, torch.bfloat16)
    got = kv.clone()
    T.store_cache(got[0], got[1], indices, k, v)
    _torch_path(monkeypatch)
    want = kv.clone()
    ops.store_cache(want[0], want[1], indices, k, v)
    assert torch.equal(got, want)


def test_store_cache_still_checks_the_dtype() -> None:
    cache = torch.zeros(4, 2, 8, device=DEVICE, dtype=torch.bfloat16)
    k = torch.zeros(1, 2, 8, device=DEVICE)
    with pytest.raises(TypeError, match="does not match the cache dtype"):
        ops.store_cache(cache, cache.clone(), torch.tensor([0], device=DEVICE), k, k)


def _norms(d: int) -> list[RMSNorm]:
    norms = []
    for seed in (0, 1):
        norm = RMSNorm(d, 1e-6)
        norm.weight = (1 + torch.randn(d, generator=torch.Generator().manual_seed(seed)) / 4).to(
            DEVICE, torch.bfloat16
        )
        norms.append(norm)
    return norms


class _RecordingBackend(BaseAttnBackend):
    """记下交给 ``forward`` 的 q、k、v，原样返回 q；``forward_norm_rope`` 用基类的默认写法。"""

    def __init__(self) -> None:
        self.seen: list[torch.Tensor] = []

    def prepare_metadata(self, batch: Any) -> None:
        raise NotImplementedError

    def forward(self, q, k, v, layer_id, batch):  # type: ignore[no-untyped-def]
        self.seen.append(torch.cat([q.flatten(1), k.flatten(1), v.flatten(1)], dim=-1))
        return q


def test_attention_layer_fused_path_equals_separate_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """注意力层：合并的算子（强制走 Triton）和分开的三步交给后端的 q、k、v 逐位相同。"""
    hq, hk, d, tokens = 4, 2, 64, 3
    config = RotaryConfig(d, d, 256, 10000.0, None)
    layer = AttentionLayer(0, hq, hk, d, config, *_norms(d))
    assert layer._fuse_norm_rope
    backend = _RecordingBackend()
    positions = torch.tensor([3, 9, 100], device=DEVICE)
    ctx = SimpleNamespace(batch=SimpleNamespace(positions=positions), attn_backend=backend)
    monkeypatch.setattr(attention_module, "get_global_ctx", lambda: ctx)
    gen = torch.Generator().manual_seed(5)
    qkv = _values((tokens, (hq + 2 * hk) * d), gen, exact=True).to(DEVICE, torch.bfloat16)
    layer.forward(qkv.clone())  # 合并的算子按设备分派：CPU 上就是分开的三步
    monkeypatch.setattr(attn_base, "qk_norm_rope_inplace", T.qk_norm_rope_inplace)
    fused = layer.forward(qkv.clone())
    monkeypatch.setattr(layer, "_fuse_norm_rope", False)
    _torch_path(monkeypatch)
    separate = layer.forward(qkv.clone())
    seen = backend.seen
    assert len(seen) == 3
    assert torch.equal(seen[1], seen[2]) and torch.equal(fused, separate)
    assert torch.equal(seen[0], seen[2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_qk_norm_rope_store_equals_the_two_kernels(
    shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    """一个 kernel 做归一化、RoPE 和写 KV：q、k（原地）和两个池子都和先 ``qk_norm_rope_inplace``
    再 ``store_cache`` 逐位相同；别的槽位、v 本身一个数也不动。"""
    tokens, hq, hk, d, rot = shape
    qkv, qw, kw, pos, cache = _case(tokens, hq, hk, d, rot, dtype, exact=False)
    gen = torch.Generator().manual_seed(tokens + d)
    slots = 3 * tokens + 5
    indices = torch.randperm(slots, generator=gen)[:tokens].to(DEVICE, torch.int32)
    pools = torch.randn(2, slots, hk, d, generator=gen).to(DEVICE, dtype)
    got_qkv, got_pools = qkv.clone(), pools.clone()
    q, k = _split(got_qkv, hq, hk, d)
    v = got_qkv[:, (hq + hk) * d :]  # 二维的 (T, Hkv * D)：和引擎里一样是 qkv 的视图
    T.qk_norm_rope_store(pos, q, k, v, qw, kw, 1e-6, cache, d, *got_pools, indices)
    want_qkv, want_pools = qkv.clone(), pools.clone()
    q, k = _split(want_qkv, hq, hk, d)
    T.qk_norm_rope_inplace(pos, q, k, qw, kw, 1e-6, cache, d)
    T.store_cache(*want_pools, indices, k, want_qkv[:, (hq + hk) * d :])
    assert torch.equal(got_qkv, want_qkv)
    assert torch.equal(got_pools, want_pools)
    untouched = torch.ones(slots, dtype=torch.bool)
    untouched[indices.long().cpu()] = False
    assert torch.equal(got_pools[:, untouched.to(DEVICE)], pools[:, untouched.to(DEVICE)])


def test_qk_norm_rope_store_rejects_what_it_cannot_do() -> None:
    qkv, qw, kw, pos, cache = _case(3, 4, 2, 64, 64, torch.float32, exact=False)
    q, k = _split(qkv, 4, 2, 64)
    v = qkv[:, 6 * 64 :]
    pools = torch.zeros(2, 8, 2, 64, device=DEVICE)
    with pytest.raises(ValueError, match="3 tokens but indices"):
        T.qk_norm_rope_store(pos, q, k, v, qw, kw, 1e-6, cache, 64, *pools, pos[:2])
    wrong = torch.zeros(2, 8, 4, 32, device=DEVICE)
    with pytest.raises(ValueError, match="the caches do not match"):
        T.qk_norm_rope_store(pos, q, k, v, qw, kw, 1e-6, cache, 64, *wrong, pos)
    with pytest.raises(TypeError, match="does not match the cache dtype"):  # 参照写法同样不收
        ops.qk_norm_rope_store(
            pos.cpu(), q.cpu(), k.cpu(), v.cpu(), qw.cpu(), kw.cpu(), 1e-6, cache.cpu(), 64,
            *pools.cpu().to(torch.bfloat16), pos.cpu(),
        )  # fmt: skip


def test_triton_backend_stores_kv_inside_the_norm_rope_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triton 后端的 ``forward_norm_rope``（写 KV 合进了那个 kernel，强制走 Triton）和基类的默认
    写法（``apply`` 之后 ``forward``，分开的 kernel 写 KV）：prefill 一步、decode 一步，输出和
    KV 池都逐位相同。"""
    hq, hk, d = 4, 2, 64
    _, qw, kw, _, rope = _case(1, hq, hk, d, d, torch.bfloat16, exact=False)
    table = torch.zeros(2, 16, dtype=torch.int32, device=DEVICE)
    table[0, :6] = torch.arange(6) + 1  # 两个请求的槽位不连续、不从 0 开始
    table[1, :4] = torch.arange(4) + 20
    pool = MHAKVCache(hk, 1, d, 32, 1, torch.bfloat16, torch.device(DEVICE))
    backend = TritonAttnBackend(pool, table)
    monkeypatch.setattr(attn_base, "qk_norm_rope_inplace", T.qk_norm_rope_inplace)
    results = []
    for fused in (False, True):
        pool._kv_buffer.zero_()
        gen = torch.Generator().manual_seed(7)
        outputs = []
        for phase, lengths, cached in (("prefill", (5, 3), (0, 0)), ("decode", (6, 4), (5, 3))):
            reqs = [
                Req(torch.arange(10, 10 + n, dtype=torch.int32), table_idx=i, cached_len=c)
                for i, (n, c) in enumerate(zip(lengths, cached, strict=True))
            ]
            batch = Batch(reqs, phase)
            prepare_batch(batch, table)
            backend.prepare_metadata(batch)
            qkv = torch.randn(batch.num_tokens, (hq + 2 * hk) * d, generator=gen)
            q, k, v = qkv.to(DEVICE, torch.bfloat16).split([hq * d, hk * d, hk * d], dim=-1)
            q, k, v = q.view(-1, hq, d), k.view(-1, hk, d), v.view(-1, hk, d)
            norm_rope = QKNormRope(batch.positions, qw, kw, 1e-6, rope)
            if fused:
                monkeypatch.setattr(attn_base, "qk_norm_rope_store", T.qk_norm_rope_store)
                attend = backend.forward_norm_rope
            else:  # 基类的写法：先 apply，再交给 forward（store_cache 单独写 KV）
                attend = partial(BaseAttnBackend.forward_norm_rope, backend)
            outputs.append(attend(q, k, v, 0, batch, norm_rope))
        results.append((outputs, pool._kv_buffer.clone()))
    (separate, pool_separate), (fused_out, pool_fused) = results
    assert all(torch.equal(a, b) for a, b in zip(separate, fused_out, strict=True))
    assert torch.equal(pool_separate, pool_fused)
    written = pool_fused[:, 0, :, 0].abs().sum(dim=(-1, -2)) > 0  # (K/V, 槽位)：写过的槽位
    expected = torch.zeros(32, dtype=torch.bool)
    expected[[*range(1, 7), *range(20, 24)]] = True
    assert torch.equal(written.cpu(), expected.expand(2, -1))


# ---------------------------------------------------------------- decode 注意力的分块


def test_decode_tiles_split_less_as_the_batch_grows() -> None:
    """段数是不超过 16 的 2 的幂，批越大切得越少（不会变多）；只有不切就有 1536 个以上的 program
    时才不切，program 不超过 64 个时切满 16 段；一块 64 个 token，正好 64 个 program 时 32 个。"""
    from minisgl.attention.triton_attn import decode_tiles_cuda

    previous = 16
    for bs in range(1, 257):
        splits, tiles = decode_tiles_cuda(bs, 8)
        assert 1 <= splits <= previous and splits & (splits - 1) == 0
        assert (splits == 1) == (bs * 8 > 1536)
        assert (splits == 16) == (bs * 8 <= 64)
        assert tiles["BLOCK_N"] == (32 if bs * 8 == 64 else 64)
        assert tiles["num_warps"] in (2, 4, 8)
        previous = splits


class _LaunchSpy:
    """代替一个 Triton kernel：``kernel[grid](...)`` 先记下网格，再交给真的 kernel。"""

    def __init__(self, kernel: Any, grids: list[tuple[int, ...]]) -> None:
        self.kernel, self.grids = kernel, grids

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        self.grids.append(grid)
        return self.kernel[grid]


@pytest.mark.parametrize("bs", [1, 8, 16, 64, 256])
def test_decode_with_the_gpu_tiles_matches_a_reference(
    monkeypatch: pytest.MonkeyPatch, bs: int
) -> None:
    """GPU 上按批大小挑的段数、块大小（``decode_tiles_cuda``），放进同一个 kernel 里结果也对：
    用 Qwen3-0.6B 的 8 个 KV 头挑出分块，再在一个小问题上（解释器里）和逐个请求的 softmax 比较。
    长度 1、短于一块、跨好几块和好几段的请求都在里面。batch 256 只切一段：合并的 kernel
    不启动，结果由 partial kernel 直接写。"""
    from minisgl.attention import triton_attn

    splits, tiles = triton_attn.decode_tiles_cuda(bs, 8)
    monkeypatch.setattr(triton_attn, "NUM_SPLITS", splits)
    monkeypatch.setattr(triton_attn, "BLOCK_N", tiles["BLOCK_N"])
    gen = torch.Generator().manual_seed(bs)
    hq, hkv, d, columns = 4, 2, 32, 320
    lens = torch.tensor([1, 40, 300], dtype=torch.int32)
    table = torch.randperm(len(lens) * columns, generator=gen).to(torch.int32).view(-1, columns)
    k_pool = torch.randn(table.numel(), hkv, d, generator=gen)
    v_pool = torch.randn(table.numel(), hkv, d, generator=gen)
    q = torch.randn(len(lens), hq, d, generator=gen)
    rows = torch.tensor([2, 0, 1], dtype=torch.int32)
    dev = [t.to(DEVICE) for t in (q, k_pool, v_pool, table, rows, lens)]
    merges: list[tuple[int, ...]] = []  # 只切一段时 partial kernel 直接写输出，不启动合并的 kernel
    spy = _LaunchSpy(triton_attn._decode_reduce_kernel, merges)
    monkeypatch.setattr(triton_attn, "_decode_reduce_kernel", spy)
    out = triton_attn.decode_attention(*dev).float().cpu()
    assert len(merges) == (0 if splits == 1 else 1)
    for i, (row, n) in enumerate(zip(rows.tolist(), lens.tolist())):
        slots = table[row, :n].long()
        k = k_pool[slots].repeat_interleave(hq // hkv, dim=1)  # (n, hq, d)
        v = v_pool[slots].repeat_interleave(hq // hkv, dim=1)
        p = torch.softmax(torch.einsum("hd,nhd->hn", q[i], k) / d**0.5, dim=-1)
        want = torch.einsum("hn,nhd->hd", p, v)
        assert (out[i] - want).abs().max() < 1e-4, (bs, i)


# ---------------------------------------------------------------- 依赖启动


@pytest.fixture
def fresh_dependent_launch() -> Iterator[None]:
    """``dependent_launch`` 按设备只决定一次：测试前后都清掉这个缓存，改环境变量才生效。"""
    T._dependent_launch_on.cache_clear()
    yield
    T._dependent_launch_on.cache_clear()


@pytest.mark.usefixtures("fresh_dependent_launch")
def test_dependent_launch_only_on_hopper_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU 张量（解释器）上 kernel 收到 ``PDL=False``、没有 ``launch_pdl``；sm_90 起的 CUDA 设备上
    只在录 CUDA Graph 时打开；``MINISGL_DISABLE_PDL=1`` 时哪里都关掉。"""
    off, on = {"PDL": False}, {"PDL": True, "launch_pdl": True}
    assert T.dependent_launch(torch.zeros(1)) == off
    x = torch.zeros(1, device=DEVICE)
    assert T.dependent_launch(x) == off  # 不在录图
    hopper = ON_CUDA and T.gdc_wait is not None and torch.cuda.get_device_capability()[0] >= 9
    if ON_CUDA:
        graph, seen = torch.cuda.CUDAGraph(), []
        with torch.cuda.graph(graph):
            seen.append(T.dependent_launch(x))
            x.add_(1)  # 图里至少录一个 kernel
        assert seen == [on if hopper else off]
    T._dependent_launch_on.cache_clear()
    monkeypatch.setenv("MINISGL_DISABLE_PDL", "1")
    assert T.dependent_launch(x) == off


def test_dependent_launch_follows_graph_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """上一个测试在 CPU 上走不到"录图时打开"的那一支：这里假装设备支持、假装正在录图。
    ``without_dependent_launch`` 里（可以套几层）录的图不开。"""
    monkeypatch.setattr(T, "_dependent_launch_on", lambda device: True)
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    x = torch.zeros(1)
    assert T.dependent_launch(x) == {"PDL": False}
    capturing[0] = True
    assert T.dependent_launch(x) == {"PDL": True, "launch_pdl": True}
    with T.without_dependent_launch():  # 录 prefill 的图：不开
        with T.without_dependent_launch():
            assert T.dependent_launch(x) == {"PDL": False}
        assert T.dependent_launch(x) == {"PDL": False}
    assert T.dependent_launch(x) == {"PDL": True, "launch_pdl": True}


def _decode_chain(h: torch.Tensor, res: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """一层 MLP 在 decode 时的那串 kernel：加残差的 RMSNorm → GEMV 连 SiLU-mul → GEMV（切 K）
    → RMSNorm。每一个都读上一个刚写的结果。"""
    TL = ops.triton_linear
    T.rmsnorm(h, w["norm"], 1e-6, out=h, residual=res)
    down = TL.linear_small_m(TL.linear_silu_and_mul(h, w["gate_up"]), w["down"])
    return T.rmsnorm(down, w["norm"], 1e-6)


def _layers(h: torch.Tensor, res: torch.Tensor, w: dict[str, torch.Tensor]) -> None:
    for _ in range(28):
        h.copy_(_decode_chain(h, res, w))


@pytest.mark.skipif(not ON_CUDA, reason="依赖启动只在 GPU 上；CPU 上同样的 kernel 由上面的测试核对")
@pytest.mark.usefixtures("fresh_dependent_launch")
def test_dependent_launch_in_a_graph_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """这串 kernel 录进一张 CUDA Graph 重放 28 遍，依赖启动打开、关掉各一次：逐位相同。哪个 kernel
    没等上一个写完就去读，这里就对不上。"""
    gen = torch.Generator().manual_seed(0)
    hidden, inter = 1024, 3072
    w = {
        "norm": (1 + torch.randn(hidden, generator=gen) / 4).to(DEVICE, torch.bfloat16),
        "gate_up": (torch.randn(2 * inter, hidden, generator=gen) / 32).to(DEVICE, torch.bfloat16),
        "down": (torch.randn(hidden, inter, generator=gen) / 32).to(DEVICE, torch.bfloat16),
    }
    start = torch.randn(1, hidden, generator=gen).to(DEVICE, torch.bfloat16)
    results = []
    for disabled in ("0", "1"):
        monkeypatch.setenv("MINISGL_DISABLE_PDL", disabled)
        T._dependent_launch_on.cache_clear()
        h, res = start.clone(), torch.zeros_like(start)
        _layers(h, res, w)  # 编译；录图之前先跑一遍
        graph = torch.cuda.CUDAGraph()
        h.copy_(start)
        res.zero_()
        with torch.cuda.graph(graph):
            _layers(h, res, w)
        graph.replay()
        torch.cuda.synchronize()
        results.append((h.clone(), res.clone()))
    assert torch.isfinite(results[0][0]).all()
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


# ---------------------------------------------------------------- 服务中途不现编译


@pytest.mark.skipif(
    not ON_CUDA, reason="解释器不编译；CPU 上第 18 章、第 11 章的测试核对元数据每段都对齐"
)
def test_new_batch_sizes_compile_nothing() -> None:
    """每个 kernel 在一个批大小上跑过一次之后，换成别的批大小（同一组块大小）Triton 不再现编译：
    元数据每段都从 16 字节对齐的地址开始，token 数不参与特化（是不是 1、是不是 16 的倍数）。
    连着拼的元数据在批大小模 4 一变时、token 数头一回是 1 或 16 的倍数时，这里都会数到编译。"""
    from minisgl.attention import triton_attn
    from minisgl.kernel.compiles import watch_triton_compiles

    hq, hkv, d, columns = 16, 8, 128, 256
    kv = MHAKVCache(
        1, hkv, d, num_pages=16 * columns, page_size=1, dtype=torch.bfloat16, device=DEVICE
    )
    table = torch.arange(16 * columns, dtype=torch.int32, device=DEVICE).view(16, columns)
    backend = TritonAttnBackend(kv, table)
    gen = torch.Generator().manual_seed(0)
    for pool in (kv.k_cache(0), kv.v_cache(0)):
        pool.copy_(torch.randn(pool.shape, generator=gen))
    k_pool, v_pool = kv.k_cache(0).flatten(0, 1), kv.v_cache(0).flatten(0, 1)
    norm_w = torch.ones(hq * d, dtype=torch.bfloat16, device=DEVICE)
    head_w = torch.ones(d, dtype=torch.bfloat16, device=DEVICE)
    cache = torch.rand(columns, d, device=DEVICE)

    def attention(bs: int, new_tokens: int) -> None:
        reqs = [
            Req(
                torch.arange(100 + i, dtype=torch.int32),
                table_idx=i,
                cached_len=100 + i - new_tokens,
            )
            for i in range(bs)
        ]
        batch = Batch(reqs, "decode" if new_tokens == 1 else "prefill")
        backend.prepare_metadata(batch)
        meta = batch.attn_metadata
        q = torch.randn(bs * new_tokens, hq, d, generator=gen).to(DEVICE, torch.bfloat16)
        if meta.is_decode:
            triton_attn.decode_attention(q, k_pool, v_pool, table, meta.rows, meta.kv_lens)
        else:
            args = (meta.rows, meta.cu_q, meta.cached, meta.work)
            triton_attn.extend_attention(q, k_pool, v_pool, table, *args)

    def norms(tokens: int) -> None:
        qkv = torch.randn(tokens, (hq + 2 * hkv) * d, generator=gen).to(DEVICE, torch.bfloat16)
        q, k = _split(qkv, hq, hkv, d)
        positions = torch.arange(tokens, dtype=torch.int32, device=DEVICE)
        T.qk_norm_rope_inplace(positions, q, k, head_w, head_w, 1e-6, cache, d)
        x = qkv[:, : hq * d].contiguous()
        T.rmsnorm(x, norm_w, 1e-6, residual=torch.zeros_like(x))

    sizes = range(9, 16)  # 8 个 KV 头：这几个批大小的 decode 切段数、块大小都一样
    assert len({str(triton_attn.decode_tiles_cuda(bs, hkv)) for bs in sizes}) == 1
    attention(9, 1), attention(4, 7)  # 热身：各编译（或从磁盘载入）一份
    for least, _ in T.ROW_ELEMENTS:  # 按行的 kernel 每一档 token 数一种块，各热身一次
        norms(least + 8)
    torch.cuda.synchronize()
    compiled: list[str] = []
    stop = watch_triton_compiles(compiled.append)
    assert stop is not None
    try:
        for bs in sizes:
            attention(bs, 1)
        for bs in (5, 6, 7, 8):
            attention(bs, 7)
        for tokens in (1, 16, 17, 32, 63, 64, 100, 512, 600):
            norms(tokens)
        torch.cuda.synchronize()
    finally:
        stop()
    assert compiled == []


def test_warm_up_token_counts_cover_every_silu_block_and_gemv_config() -> None:
    """引擎启动时跑的那几个 token 数，恰好每档 SiLU-mul 的块各一个：服务里不管一步多少行，
    它的块都已经编译过；按行处理的 kernel（隐藏层 1024 维、head_dim 128）一个程序拿几行，也都在
    预热的 token 数里出现过；GEMV 也一样，Qwen3-0.6B 的每个投影在 M = 1～16 时挑的参数都在预热的
    token 数里出现过。PyTorch 的写法不用编译：CPU 上一个也不跑。"""
    from minisgl.kernel import triton_linear as L

    counts = T.token_counts_to_warm_up()
    blocks = [T._silu_block(n) for n in counts]
    assert len(set(blocks)) == len(blocks)
    assert {T._silu_block(rows) for rows in range(1, 20000)} == set(blocks)
    for width in (1024, 128):
        rows = {T._block_rows(width, n) for n in range(1, 20000)}
        assert rows == {T._block_rows(width, n) for n in counts}
    assert {T._block_rows(128, n) for n in counts} == {4, 8, 32}  # 每档各一种块
    warm = L.token_counts_to_warm_up()
    for n, k in [(4096, 1024), (1024, 2048), (6144, 1024), (1024, 3072)]:  # qkv、o、gate_up、down
        configs = {L.pick_config(m, n, k) for m in range(1, L.MAX_M + 1)}
        assert configs == {L.pick_config(m, n, k) for m in warm}
    assert ops.warm_up_token_counts(torch.device("cpu")) == ()


def test_warm_up_prefill_writes_only_the_dummy_page(tiny_model: Any, make_llm: Any) -> None:
    """假的 prefill 只把 K/V 写进哑页，真的页一个字节不动；比页表一行还长的 token 数跳过。
    之后生成的 token 和没有预热时一样。"""
    prompts = [list(range(50, 50 + n)) for n in (5, 17, 3)]
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    want = [o.token_ids for o in make_llm(tiny_model).generate(prompts, params)]
    llm = make_llm(tiny_model, max_seq_len=64)
    engine = llm.scheduler.engine
    pool = engine.kv_cache
    dummy = slice(engine.dummy_page * engine.page_size, (engine.dummy_page + 1) * engine.page_size)
    after = [pool.k_cache(0).flatten(0, 1), pool.v_cache(0).flatten(0, 1)]
    for a in after:  # GPU 上建引擎时已经预热过一次：先把哑页清零，才看得出这一次写了它
        a[dummy] = 0
    before = [a.clone() for a in after]
    engine.warm_up_prefill((1, 40, 64, 65, 512))
    for b, a in zip(before, after):
        real = torch.ones(a.shape[0], dtype=torch.bool)
        real[dummy] = False
        assert torch.equal(a[real], b[real]) and a[dummy].abs().sum() > 0
    assert [o.token_ids for o in llm.generate(prompts, params)] == want


@pytest.mark.skipif(not ON_CUDA, reason="解释器不编译；CPU 上由上面两个测试核对预热的档位和写法")
def test_engine_compiles_nothing_after_start(tiny_model: Any) -> None:
    """GPU 上引擎建好以后（CUDA Graph 录好、prefill 按档预热过），长短不一的 prefill、各种批大小
    的 decode 都不再让 Triton 现编译。"""
    from minisgl.kernel.compiles import watch_triton_compiles
    from minisgl.llm import LLM

    llm = LLM(tiny_model, device=DEVICE, dtype=torch.bfloat16, num_pages=4096,
              max_running_reqs=16, max_seq_len=1024)  # fmt: skip
    compiled: list[str] = []
    stop = watch_triton_compiles(compiled.append)
    assert stop is not None
    try:
        params = SamplingParams(max_tokens=4, ignore_eos=True)
        for lengths in ([3], [70, 9], [600], [5] * 7, [33] * 16, [300, 400]):
            llm.generate([list(range(10, 10 + n)) for n in lengths], params)
    finally:
        stop()
        llm.shutdown()
    assert compiled == []
