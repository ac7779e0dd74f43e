"""第 6 章：真的起多个进程做张量并行。

- ``spawn_ranks``：每个 rank 知道自己是谁、在哪个设备上；一个 rank 出错或卡住时，其余的 rank
  被杀掉、错误信息说清楚是谁怎么了，不留下任何子进程；
- tp=2 与 tp=1 生成的 token 相同、logits 只差浮点舍入（tiny-qwen3、tiny-qwen3-moe）；
- tp=4 同时覆盖两种"分不均"：KV 头比 rank 少（2 个 KV 头、4 个 rank），词表不能被 tp 整除
  （把 tiny-qwen3 的词表截到 151669 = 分词器的真实大小，写进临时文件夹）。
"""

from __future__ import annotations

import json
import operator
import shutil
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest
import torch
from safetensors.torch import load_file, save_file

from minisgl.distributed import (
    DistributedInfo,
    destroy_distributed,
    get_tp_info,
    init_distributed,
    reset_tp_info,
    set_tp_info,
    spawn_ranks,
)
from minisgl.models import ModelConfig, create_model, load_and_generate
from minisgl.models.utils import GenerateOutput
from minisgl.utils import pick_device

# "The capital of France is"，以及聊天模板包好的"用一句话介绍一下你自己。"
SHORT = [785, 6722, 315, 9625, 374]
CHAT = [151644, 872, 198, 11622, 105321, 109432, 107828, 1773, 151645, 198, 151644, 77091, 198]
CHAT += [151667, 271, 151668, 271]
PROMPTS = [CHAT, SHORT]
STEPS = 12
ATOL = 1e-4  # 切分改变了矩阵乘和求和的顺序：只允许浮点舍入级别（~3e-5）的差别
ODD_VOCAB = 151669  # 分词器的真实大小：151669 = 7 × 47 × 461，不能被 2、4 整除


@pytest.fixture(autouse=True)
def clean_state() -> Iterator[None]:
    reset_tp_info()
    yield
    destroy_distributed()


def no_children() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def assert_same_as_tp1(outs: list[GenerateOutput], ref: GenerateOutput, vocab: int) -> float:
    """每个 rank 的结果都和 tp=1 相同：token 逐个相同，logits 只差舍入；返回最大误差。"""
    worst = 0.0
    for rank, out in enumerate(outs):
        assert out.token_ids == ref.token_ids, f"rank {rank}"
        for got, want in zip(out.logits, ref.logits):
            assert got.shape == want.shape == (STEPS, vocab)
            worst = max(worst, (got - want).abs().max().item())
    assert worst < ATOL, f"max |Δlogit| = {worst:.2e}"
    # 各 rank 拿到的 logits 逐位相同：它们来自同一次 all_gather
    for out in outs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(out.logits, outs[0].logits))
    return worst


# ---------------------------------------------------------------- 进程组与启动


def test_each_rank_knows_who_and_where_it_is() -> None:
    assert spawn_ranks(get_tp_info, 2) == [DistributedInfo(0, 2), DistributedInfo(1, 2)]
    assert spawn_ranks(pick_device, 2) == [torch.device("cpu")] * 2
    assert not no_children()


def test_a_failing_rank_is_reported_and_nobody_is_left_behind() -> None:
    with pytest.raises(RuntimeError, match=r"(?s)failed.*ZeroDivisionError"):
        spawn_ranks(operator.truediv, 2, (1, 0))
    assert not no_children()


def test_a_stuck_rank_times_out_and_is_killed() -> None:
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"still running after 3 s; all ranks were killed"):
        spawn_ranks(time.sleep, 2, (600,), timeout_s=3)
    assert time.monotonic() - start < 30
    assert not no_children()


def test_rank_functions_must_be_importable() -> None:
    def local() -> None: ...

    with pytest.raises(ValueError, match="importable"):
        spawn_ranks(local, 2)
    with pytest.raises(ValueError, match="'cpu' or 'cuda'"):
        spawn_ranks(get_tp_info, 2, device="mps")
    if torch.cuda.device_count() < 64:
        with pytest.raises(RuntimeError, match="64 GPUs"):
            spawn_ranks(get_tp_info, 64, device="cuda")


def test_init_distributed_single_rank_needs_no_process_group(tmp_path: Path) -> None:
    info = init_distributed(0, 1, init_method=f"file://{tmp_path / 'store'}")
    assert info == get_tp_info() == DistributedInfo(0, 1)
    assert not torch.distributed.is_initialized()
    destroy_distributed()
    with pytest.raises(ValueError, match="NCCL"):
        init_distributed(0, 2, init_method=f"file://{tmp_path / 'store'}", backend="nccl")
    assert get_tp_info() == DistributedInfo(0, 1)  # 失败时不留下半截的 TP 信息


def test_tp3_is_rejected_with_a_clear_message(tiny_model: Path) -> None:
    """tiny-qwen3 有 4 个 Q 头，分不成 3 份：建模型时就报错，说出是哪个数分不开。"""
    set_tp_info(0, 3)
    config = ModelConfig.from_pretrained(tiny_model)
    with torch.device("meta"), pytest.raises(ValueError, match="4 is not divisible by 3"):
        create_model(config)


# ---------------------------------------------------------------- tp>1 与 tp=1 逐个 token 相同


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-qwen3-moe"])
def test_tp2_matches_tp1(models_dir: Path, name: str) -> None:
    path = str(models_dir / name)
    ref = load_and_generate(path, PROMPTS, STEPS)
    outs = spawn_ranks(load_and_generate, 2, (path, PROMPTS, STEPS))
    worst = assert_same_as_tp1(outs, ref, ModelConfig.from_pretrained(path).vocab_size)
    print(f"{name}: tp=2 vs tp=1 max |Δlogit| = {worst:.2e}")
    assert not no_children()


@pytest.fixture(scope="module")
def odd_vocab_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny-qwen3 的一份拷贝，词表截到 151669 行（原来的 151936 行里，151669 以后的行全是 0，
    对应分词器解码不了的 id）。config.json 的 vocab_size 跟着改，其余文件原样复制。"""
    out = tmp_path_factory.mktemp("tiny-qwen3-vocab-151669")
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(tiny_model / name, out / name)
    config = json.loads((tiny_model / "config.json").read_text(encoding="utf-8"))
    config["vocab_size"] = ODD_VOCAB
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    weights = load_file(tiny_model / "model.safetensors")
    embed = weights["model.embed_tokens.weight"]
    assert not embed[ODD_VOCAB:].any()  # 截掉的都是全 0 的行
    weights["model.embed_tokens.weight"] = embed[:ODD_VOCAB].clone()  # 词表绑定：没有 lm_head
    save_file(weights, out / "model.safetensors")
    return out


def test_odd_vocab_copy_is_the_same_model(tiny_model: Path, odd_vocab_model: Path) -> None:
    """截掉的行 logit 恒为 0、从来选不中：两个模型生成同样的 token，前 151669 个 logits 相同。"""
    full = load_and_generate(str(tiny_model), PROMPTS, STEPS)
    odd = load_and_generate(str(odd_vocab_model), PROMPTS, STEPS)
    assert odd.token_ids == full.token_ids
    for a, b in zip(full.logits, odd.logits):
        torch.testing.assert_close(a[:, :ODD_VOCAB], b, rtol=0, atol=ATOL)


def test_tp4_with_kv_heads_fewer_than_ranks_and_odd_vocab(odd_vocab_model: Path) -> None:
    """2 个 KV 头、4 个 rank：相邻两个 rank 共用一个 KV 头的副本。151669 行的词表分给 4 个 rank：
    每个 37918 行，最后一个 rank 只有 37915 行真的，末尾补 3 行 0，拼回来之后截掉。"""
    config = ModelConfig.from_pretrained(odd_vocab_model)
    assert config.num_kv_heads == 2 and config.vocab_size % 4 != 0
    ref = load_and_generate(str(odd_vocab_model), PROMPTS, STEPS)
    outs = spawn_ranks(load_and_generate, 4, (str(odd_vocab_model), PROMPTS, STEPS))
    worst = assert_same_as_tp1(outs, ref, ODD_VOCAB)
    print(f"tp=4, vocab {ODD_VOCAB}: max |Δlogit| = {worst:.2e}")
    assert not no_children()
