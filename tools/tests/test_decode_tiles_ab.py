"""``tools/decode_tiles_ab.py``：只在程序数少的时候换分块，用完换回原来的函数；``--check`` 把
整个流程（每组建一个 LLM、量 decode、来回各一遍）在 CPU 上走通。GPU 上的计时这里不测。"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import decode_tiles_ab  # noqa: E402

from minisgl.utils import pick_device  # noqa: E402

triton_attn = decode_tiles_ab.triton_attn
REPO = Path(__file__).resolve().parents[2]


def test_only_small_batches_get_the_attention_tiles() -> None:
    original = triton_attn.decode_tiles_cuda
    tiles = {"BLOCK_N": 32, "num_warps": 8, "num_stages": 2}
    variant = decode_tiles_ab.Variant(attention=(4, tiles))
    with decode_tiles_ab.patched(variant):
        assert triton_attn.decode_tiles_cuda(1, 8) == variant.attention  # 8 个程序
        assert triton_attn.decode_tiles_cuda(7, 8) == variant.attention  # 56 个
        assert triton_attn.decode_tiles_cuda(8, 8) == original(8, 8)  # 64 个：照旧
        assert triton_attn.decode_tiles_cuda(256, 8) == original(256, 8)
    assert triton_attn.decode_tiles_cuda is original
    batch8 = decode_tiles_ab.VARIANTS["b8-8s-4w2s"]  # 只换正好 64 个程序的那一档
    with decode_tiles_ab.patched(batch8):
        assert triton_attn.decode_tiles_cuda(8, 8) == batch8.attention
        assert triton_attn.decode_tiles_cuda(7, 8) == original(7, 8)
        assert triton_attn.decode_tiles_cuda(16, 8) == original(16, 8)
    assert triton_attn.decode_tiles_cuda is original
    with decode_tiles_ab.patched(decode_tiles_ab.Variant()):  # "now"：什么也不换
        assert triton_attn.decode_tiles_cuda(1, 8) == original(1, 8)
    assert triton_attn.decode_tiles_cuda is original


def test_only_long_k_gemv_at_one_row_gets_the_config() -> None:
    """o_proj（K=2048）、down（K=3072）在 M=1 时换；qkv、gate_up（K=1024）和 M>1 照旧。"""
    linear = decode_tiles_ab.triton_linear
    original, tiles = linear.pick_config, triton_attn.decode_tiles_cuda
    variant = decode_tiles_ab.VARIANTS["gemv-nosplit-8"]
    with decode_tiles_ab.patched(variant):
        assert linear.pick_config(1, 1024, 2048) == variant.gemv_long_k
        assert linear.pick_config(1, 1024, 3072) == variant.gemv_long_k
        assert linear.pick_config(1, 4096, 1024) == original(1, 4096, 1024)
        assert linear.pick_config(8, 1024, 2048) == original(8, 1024, 2048)
        assert triton_attn.decode_tiles_cuda(1, 8) == tiles(1, 8)  # 注意力的分块照旧
    assert linear.pick_config is original


# qkv、gate_up（输出比输入宽）、o_proj、down（不比输入宽），几行和一行
GEMV_SHAPES = [(8, 4096, 1024), (2, 6144, 1024), (8, 1024, 2048), (8, 1024, 3072), (1, 4096, 1024)]


@pytest.mark.parametrize("name", ["rows-wide-16", "rows-narrow-16n", "rows-fma", "rows-8w"])
def test_gemv_of_several_rows_gets_the_config_by_width(name: str) -> None:
    """几行时输出比输入宽的换 ``rows_wide``，不比输入宽的换 ``rows_narrow``；M=1 的、variant
    没给的那一样照旧。"""
    linear = decode_tiles_ab.triton_linear
    original = linear.pick_config
    variant = decode_tiles_ab.VARIANTS[name]
    with decode_tiles_ab.patched(variant):
        for m, n, k in GEMV_SHAPES:
            swapped = variant.rows_wide if n > k else variant.rows_narrow
            expected = swapped if m > 1 and swapped is not None else original(m, n, k)
            assert linear.pick_config(m, n, k) == expected
    assert linear.pick_config is original


def test_gate_silu_variants_swap_the_fused_kernel_and_put_it_back() -> None:
    """ "silu-apart" 让 ``GatedMLP`` 拆回 GEMV 加 SiLU-mul 两步（结果和合成的一样，CPU 上本来就是
    这两步），"silu-apart-m2" 只拆几行的，一行的仍交给合成的那个；"silu-16-4w"、"silu-512k"、
    "silu-4w" 只换合成 kernel 的参数。退出时都换回来。"""
    import torch

    utils, linear = decode_tiles_ab.model_utils, decode_tiles_ab.triton_linear
    fused, config = utils.linear_silu_and_mul, linear.SILU_CONFIG
    x, w = torch.randn(3, 32), torch.randn(48, 32)
    calls: list[int] = []

    def spy(x, w, b):  # type: ignore[no-untyped-def]
        calls.append(x.shape[0])  # 交给合成的那个 kernel 的行数
        return fused(x, w, b)

    utils.linear_silu_and_mul = spy
    try:
        for name, fused_rows in (("silu-apart", []), ("silu-apart-m2", [1])):
            calls.clear()
            with decode_tiles_ab.patched(decode_tiles_ab.VARIANTS[name]):
                assert utils.linear_silu_and_mul is not spy and linear.SILU_CONFIG == config
                for rows in (1, 3):  # 分开算的和合成的结果一样
                    got = utils.linear_silu_and_mul(x[:rows], w, None)
                    assert torch.equal(got, fused(x[:rows], w, None))
            assert calls == fused_rows and utils.linear_silu_and_mul is spy
    finally:
        utils.linear_silu_and_mul = fused
    for name in ("silu-16-4w", "silu-512k", "silu-4w"):
        variant = decode_tiles_ab.VARIANTS[name]
        with decode_tiles_ab.patched(variant):
            assert utils.linear_silu_and_mul is fused and linear.SILU_CONFIG == variant.gate_silu
    assert (utils.linear_silu_and_mul, linear.SILU_CONFIG) == (fused, config)


def test_store_apart_moves_the_kv_write_back_into_its_own_kernel() -> None:
    """ "store-apart" 让 Triton 后端用基类的 ``forward_norm_rope``（归一化和 RoPE 之后 ``forward``，
    ``store_cache`` 单独写 KV）；退出时换回把写 KV 合进去的那个。"""
    backend = decode_tiles_ab.TritonAttnBackend
    inside = backend.forward_norm_rope
    assert inside is not decode_tiles_ab.BaseAttnBackend.forward_norm_rope
    with decode_tiles_ab.patched(decode_tiles_ab.VARIANTS["store-apart"]):
        assert backend.forward_norm_rope is decode_tiles_ab.BaseAttnBackend.forward_norm_rope
    assert backend.forward_norm_rope is inside
    with decode_tiles_ab.patched(decode_tiles_ab.VARIANTS["now"]):
        assert backend.forward_norm_rope is inside


def test_row_elements_are_put_back() -> None:
    """ "rows-…" 换按行处理的 kernel 每个程序读的数（token 少于 512 个时的档，rows-4096 不分档），
    ``_block_rows`` 随之变；退出时换回来。"""
    tops = decode_tiles_ab.ops.triton_ops
    elements = tops.ROW_ELEMENTS
    for name, rows in (("rows-4096", (4, 32)), ("rows-1k", (1, 8)), ("rows-128", (1, 1))):
        with decode_tiles_ab.patched(decode_tiles_ab.VARIANTS[name]):
            assert (tops._block_rows(1024, 8), tops._block_rows(128, 8)) == rows
            assert (tops._block_rows(1024, 4096), tops._block_rows(128, 4096)) == (4, 32)
    assert tops.ROW_ELEMENTS == elements
    assert (tops._block_rows(1024, 8), tops._block_rows(128, 8)) == (1, 4)
    assert (tops._block_rows(1024, 256), tops._block_rows(128, 256)) == (1, 8)


def test_sum_block_variants_swap_the_merge_block_and_put_it_back() -> None:
    """ "sum-…" 换合并部分和的 kernel 每个程序算几个输出；结果照旧等于 ``F.linear``（误差内），
    退出时换回来。"""
    linear = decode_tiles_ab.triton_linear
    block = linear._SUM_BLOCK
    x, w = torch.randn(2, 96), torch.randn(300, 96)
    cfg = linear.LinearConfig(16, 32, split_k=3, dot=False)
    for name in ("sum-128", "sum-64"):
        with decode_tiles_ab.patched(decode_tiles_ab.VARIANTS[name]):
            assert linear._SUM_BLOCK == decode_tiles_ab.VARIANTS[name].sum_block
            device = pick_device()  # GPU 机器上 Triton 不走解释器，张量要在 GPU 上
            got = linear.linear_small_m(x.to(device), w.to(device), None, cfg)
            assert torch.allclose(got.cpu(), x @ w.T, atol=1e-4, rtol=1e-4)
    assert linear._SUM_BLOCK == block


def test_check_runs_each_variant_there_and_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "tiles.json"
    original = triton_attn.decode_tiles_cuda, decode_tiles_ab.triton_linear.pick_config
    argv = ["--check", "--variants", "now", "gemv-nosplit-8", "--out", str(out)]
    assert decode_tiles_ab.main(argv) == 0
    assert (triton_attn.decode_tiles_cuda, decode_tiles_ab.triton_linear.pick_config) == original
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("[")]
    printed = [line.split()[0] for line in lines[:4]]  # 日志行以时间开头
    assert printed == ["now", "gemv-nosplit-8", "gemv-nosplit-8", "now"]  # 去一遍、回一遍
    ms = json.loads(out.read_text())["ms_per_step"]
    assert set(ms) == {"now", "gemv-nosplit-8"} and all(len(rows) == 2 for rows in ms.values())
    assert all(v > 0 for rows in ms.values() for row in rows for v in row.values())


def _decode_once() -> torch.Tensor:
    """在测试的设备上跑一次 decode 注意力（CPU 上是 Triton 解释器）：两个请求，长度跨几块、几段。"""
    gen = torch.Generator().manual_seed(0)
    slots, kv_heads, group, dim = 160, 2, 2, 32
    k_pool = torch.randn(slots, kv_heads, dim, generator=gen)
    v_pool = torch.randn(slots, kv_heads, dim, generator=gen)
    q = torch.randn(2, kv_heads * group, dim, generator=gen)
    page_table = torch.randperm(slots, generator=gen).view(2, 80).to(torch.int32)
    rows = torch.tensor([1, 0], dtype=torch.int32)
    kv_lens = torch.tensor([37, 70], dtype=torch.int32)
    device = pick_device()  # GPU 机器上 Triton 不走解释器，张量要在 GPU 上
    args = [t.to(device) for t in (q, k_pool, v_pool, page_table, rows, kv_lens)]
    return triton_attn.decode_attention(*args)


def test_attention_from_file_swaps_the_kernel_and_puts_it_back() -> None:
    """``Variant(attention_from=文件)`` 换成另一个文件里的 decode 注意力 kernel（这里拿同一个
    文件，结果逐位相同）；退出时换回原来的 kernel。"""
    kernel = triton_attn._decode_partial_kernel
    expected = _decode_once()
    source = REPO / "minisgl" / "attention" / "triton_kernels.py"
    with decode_tiles_ab.patched(decode_tiles_ab.Variant(attention_from=str(source))):
        loaded = triton_attn._decode_partial_kernel
        assert loaded is not kernel and loaded.fn.__module__ == "attention_from_file"
        assert torch.equal(_decode_once(), expected)
    assert triton_attn._decode_partial_kernel is kernel


def test_attention_from_adds_its_variant_to_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--attention-from 文件`` 自动多量一组 "attention-from-file"，来回各一遍；没有文件时
    这一组不能点名，默认的几组里也没有它。"""
    monkeypatch.chdir(REPO)
    assert "attention-from-file" not in decode_tiles_ab.VARIANTS
    with pytest.raises(SystemExit):
        decode_tiles_ab.main(["--check", "--variants", "attention-from-file"])
    source = REPO / "minisgl" / "attention" / "triton_kernels.py"
    out = tmp_path / "from-file.json"
    argv = ["--check", "--variants", "now", "--attention-from", str(source), "--out", str(out)]
    assert decode_tiles_ab.main(argv) == 0
    ms = json.loads(out.read_text())["ms_per_step"]
    assert set(ms) == {"now", "attention-from-file"} and all(len(r) == 2 for r in ms.values())
    assert triton_attn._decode_partial_kernel.fn.__module__ == "minisgl.attention.triton_kernels"
