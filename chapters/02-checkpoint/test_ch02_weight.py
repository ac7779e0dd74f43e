"""第 2 章：流式权重加载——对账、合并、张量并行切分、词表补齐、专家叠放、报错、内存上界。

真实的内嵌模型（transformers 写出来的 checkpoint）用来验证名字和数值；
形状特殊的情况（词表不能被 tp 整除、带 bias、分成几个文件、缺张量）在 tmp_path 里现写一个。
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from minisgl.distributed import DistributedInfo
from minisgl.models.config import ModelConfig
from minisgl.models.weight import (
    Checkpoint,
    CheckpointError,
    LoadStats,
    check_checkpoint,
    checkpoint_shapes,
    load_weights,
    plan_weights,
)

TINY = ["tiny-qwen3", "tiny-llama", "tiny-qwen3-moe"]
Tensors = dict[str, torch.Tensor]


def load(path: Path, config: ModelConfig, rank: int = 0, size: int = 1, **kw: Any) -> Tensors:
    return dict(load_weights(path, config, DistributedInfo(rank, size), **kw))


def raw_tensors(path: Path) -> Tensors:
    with Checkpoint(path) as checkpoint:
        return {name: checkpoint.read(name).clone() for name in checkpoint.names}


# ---------------------------------------------------------------- 在 tmp_path 里写 checkpoint


def small_hf(**changes: Any) -> dict[str, Any]:
    """一个很小的 Qwen3 config.json：4 个 Q 头、2 个 KV 头，词表 10（不能被 4 整除）。"""
    hf: dict[str, Any] = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "num_hidden_layers": 2,
        "hidden_size": 8,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 2,
        "intermediate_size": 12,
        "vocab_size": 10,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 64,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
    }
    hf.update(changes)
    return hf


def random_tensors(config: ModelConfig, seed: int = 0) -> Tensors:
    g = torch.Generator().manual_seed(seed)
    return {n: torch.randn(s, generator=g) for n, s in checkpoint_shapes(config).items()}


def write_checkpoint(
    folder: Path,
    hf: dict[str, Any],
    tensors: Tensors,
    shards: list[list[str]] | None = None,
) -> Path:
    """写出 config.json 和 safetensors；给了 shards 就分成几个文件，并写 index.json。"""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(hf), encoding="utf-8")
    if shards is None:
        save_file(tensors, str(folder / "model.safetensors"))
        return folder
    weight_map = {}
    for i, names in enumerate(shards, 1):
        file = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file({n: tensors[n] for n in names}, str(folder / file))
        weight_map.update(dict.fromkeys(names, file))
    index = {"metadata": {}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    return folder


@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, ModelConfig, Tensors]:
    config = ModelConfig.from_hf(small_hf())
    tensors = random_tensors(config)
    return write_checkpoint(tmp_path / "small", small_hf(), tensors), config, tensors


# ---------------------------------------------------------------- 对账：名字和形状


@pytest.mark.parametrize("name", TINY)
def test_expected_tensors_match_tiny_checkpoints(models_dir: Path, name: str) -> None:
    """内嵌模型的 checkpoint（transformers 加载它们时没有缺失或多余的键），名字和形状与
    checkpoint_shapes 算出来的一模一样，对账通过。"""
    config = ModelConfig.from_pretrained(models_dir / name)
    with Checkpoint(models_dir / name) as checkpoint:
        actual = {n: checkpoint.shape(n) for n in checkpoint.names}
        check_checkpoint(checkpoint, config)
    assert actual == checkpoint_shapes(config)


def transformers_layout(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """checkpoint_shapes 换成 transformers 5 在内存里的叫法：每层的专家已经叠成两个三维参数。"""
    layout: dict[str, tuple[int, ...]] = {}
    for name, shape in checkpoint_shapes(config).items():
        prefix, found, rest = name.partition(".experts.")
        if not found:
            layout[name] = shape
        elif rest.startswith("0.gate_proj"):  # 每层只加一次
            e, inter, hidden = config.num_experts, config.moe_intermediate_size, config.hidden_size
            layout[prefix + ".experts.gate_up_proj"] = (e, 2 * inter, hidden)
            layout[prefix + ".experts.down_proj"] = (e, hidden, inter)
    return layout


@pytest.mark.parametrize("name", [*TINY, "qwen3-0.6b-shape"])
def test_expected_tensors_match_transformers(models_dir: Path, name: str) -> None:
    """只看 config 算出来的张量表，和 transformers 在 meta 设备上建出的模型（不分配内存）一致：
    名字、形状、参数个数都对得上，不需要任何权重。"""
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(models_dir / name))
    config = ModelConfig.from_pretrained(models_dir / name)
    theirs = {n: tuple(t.shape) for n, t in model.state_dict().items()}
    if config.tie_word_embeddings:
        del theirs["lm_head.weight"]  # 和词嵌入是同一个张量
    assert theirs == transformers_layout(config)
    expected = sum(p.numel() for p in model.parameters())  # 共用的参数只算一次
    assert sum(math.prod(s) for s in checkpoint_shapes(config).values()) == expected
    if name == "qwen3-0.6b-shape":
        assert expected == 596_049_920


@pytest.mark.parametrize("name", TINY)
def test_plan_uses_every_tensor_once(models_dir: Path, name: str) -> None:
    config = ModelConfig.from_pretrained(models_dir / name)
    sources = [p.source for t in plan_weights(config, DistributedInfo(0, 1)) for p in t.pieces]
    assert sorted(sources) == sorted(checkpoint_shapes(config))


# ---------------------------------------------------------------- 合并（tp=1）


def test_merged_projections_equal_cat(models_dir: Path) -> None:
    for name in TINY:
        path = models_dir / name
        config = ModelConfig.from_pretrained(path)
        raw, ours = raw_tensors(path), load(path, config)
        for i in range(config.num_layers):
            p = f"model.layers.{i}."
            qkv = [raw[f"{p}self_attn.{x}_proj.weight"] for x in "qkv"]
            assert torch.equal(ours[p + "self_attn.qkv_proj.weight"], torch.cat(qkv))
            if not config.is_moe:
                gate_up = [raw[f"{p}mlp.{x}_proj.weight"] for x in ("gate", "up")]
                assert torch.equal(ours[p + "mlp.gate_up_proj.weight"], torch.cat(gate_up))
            assert not any(".q_proj" in n or ".gate_proj" in n for n in ours)
        for n in ["model.embed_tokens.weight", "model.norm.weight"]:
            assert torch.equal(ours[n], raw[n])
        # 共用词嵌入时不交出 lm_head（由模型直接用词嵌入），否则原样交出
        assert ("lm_head.weight" in ours) == (not config.tie_word_embeddings)
        assert all(t.is_contiguous() for t in ours.values())


def test_experts_stacked_in_order(models_dir: Path) -> None:
    path = models_dir / "tiny-qwen3-moe"
    config = ModelConfig.from_pretrained(path)
    raw = raw_tensors(path)
    for size in (1, 2):
        n = config.moe_intermediate_size // size
        for rank in range(size):
            ours = load(path, config, rank, size)
            rows = slice(rank * n, (rank + 1) * n)
            for i in range(config.num_layers):
                p = f"model.layers.{i}.mlp."
                gate_up, down = ours[p + "experts.gate_up_proj"], ours[p + "experts.down_proj"]
                assert gate_up.shape == (config.num_experts, 2 * n, config.hidden_size)
                assert down.shape == (config.num_experts, config.hidden_size, n)
                for e in range(config.num_experts):
                    gate = raw[f"{p}experts.{e}.gate_proj.weight"][rows]
                    up = raw[f"{p}experts.{e}.up_proj.weight"][rows]
                    assert torch.equal(gate_up[e], torch.cat([gate, up]))
                    assert torch.equal(down[e], raw[f"{p}experts.{e}.down_proj.weight"][:, rows])
                assert torch.equal(ours[p + "gate.weight"], raw[p + "gate.weight"])  # 路由器不切


# ---------------------------------------------------------------- 张量并行


@pytest.mark.parametrize("size", [1, 2, 4])
@pytest.mark.parametrize("name", TINY)
def test_tp_shards_reassemble(models_dir: Path, name: str, size: int) -> None:
    """每个 rank 的那一份拼回去，就是完整的张量；KV 头不够分时每个 rank 拿对了头。"""
    path = models_dir / name
    c = ModelConfig.from_pretrained(path)
    raw = raw_tensors(path)
    ranks = [load(path, c, r, size) for r in range(size)]
    d = c.head_dim
    q_local = c.num_qo_heads // size * d
    kv_local = max(c.num_kv_heads // size, 1) * d
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        q, k, v = (raw[f"{p}self_attn.{x}_proj.weight"] for x in "qkv")
        qkv = [w[p + "self_attn.qkv_proj.weight"] for w in ranks]
        assert all(t.shape == (q_local + 2 * kv_local, c.hidden_size) for t in qkv)
        assert torch.equal(torch.cat([t[:q_local] for t in qkv]), q)
        for r, t in enumerate(qkv):
            head = r * c.num_kv_heads // size  # 复制时相邻的 rank 共用一个头
            rows = slice(head * d, head * d + kv_local)
            assert torch.equal(t[q_local : q_local + kv_local], k[rows])
            assert torch.equal(t[q_local + kv_local :], v[rows])
        o = torch.cat([w[p + "self_attn.o_proj.weight"] for w in ranks], dim=1)
        assert torch.equal(o, raw[p + "self_attn.o_proj.weight"])
        for n in ["input_layernorm.weight", "post_attention_layernorm.weight"]:
            assert all(torch.equal(w[p + n], raw[p + n]) for w in ranks)
        if not c.is_moe:
            inter = c.intermediate_size // size
            gate, up = raw[p + "mlp.gate_proj.weight"], raw[p + "mlp.up_proj.weight"]
            gate_up = [w[p + "mlp.gate_up_proj.weight"] for w in ranks]
            assert torch.equal(torch.cat([t[:inter] for t in gate_up]), gate)
            assert torch.equal(torch.cat([t[inter:] for t in gate_up]), up)
            down = torch.cat([w[p + "mlp.down_proj.weight"] for w in ranks], dim=1)
            assert torch.equal(down, raw[p + "mlp.down_proj.weight"])
    embed = torch.cat([w["model.embed_tokens.weight"] for w in ranks])
    assert torch.equal(embed, raw["model.embed_tokens.weight"])  # 151936 能被 1、2、4 整除


def test_kv_heads_replicated_to_neighbouring_ranks(models_dir: Path) -> None:
    """tiny-qwen3 有 2 个 KV 头，tp=4：rank 0、1 拿 0 号头，rank 2、3 拿 1 号头。"""
    config = ModelConfig.from_pretrained(models_dir / "tiny-qwen3")
    k_sources = []
    for rank in range(4):
        qkv = plan_weights(config, DistributedInfo(rank, 4))[2]
        assert qkv.name == "model.layers.0.self_attn.qkv_proj.weight"
        q, k, v = qkv.pieces
        assert str(q) == f"model.layers.0.self_attn.q_proj.weight[{32 * rank}:{32 * rank + 32}]"
        k_sources.append(k.src[0])
        assert v.src == k.src
    assert k_sources == [slice(0, 32), slice(0, 32), slice(32, 64), slice(32, 64)]


@pytest.mark.parametrize(("vocab", "size"), [(10, 4), (10, 3), (5, 4)])
def test_vocab_padding(tmp_path: Path, vocab: int, size: int) -> None:
    """词表不能被 tp 整除：每个 rank ceil(vocab / tp) 行，缺的行补 0；拼回去去掉补的行就是原表。"""
    hf = small_hf(vocab_size=vocab, num_attention_heads=12, num_key_value_heads=size)
    config = ModelConfig.from_hf(hf)
    tensors = random_tensors(config)
    path = write_checkpoint(tmp_path / "model", hf, tensors)
    per = -(-vocab // size)
    for name in ["model.embed_tokens.weight", "lm_head.weight"]:
        shards = [load(path, config, r, size)[name] for r in range(size)]
        assert all(s.shape == (per, config.hidden_size) for s in shards)
        full = torch.cat(shards)
        assert torch.equal(full[:vocab], tensors[name])
        assert torch.count_nonzero(full[vocab:]) == 0 and len(full) - vocab == per * size - vocab


def test_attention_bias_is_merged_and_sharded(tmp_path: Path) -> None:
    hf = small_hf(attention_bias=True)
    config = ModelConfig.from_hf(hf)
    tensors = random_tensors(config)
    assert "model.layers.0.self_attn.k_proj.bias" in tensors
    path = write_checkpoint(tmp_path / "model", hf, tensors)
    p = "model.layers.1.self_attn."
    ranks = [load(path, config, r, 2) for r in range(2)]
    for r, ours in enumerate(ranks):
        q = tensors[p + "q_proj.bias"].chunk(2)[r]
        k, v = tensors[p + "k_proj.bias"].chunk(2)[r], tensors[p + "v_proj.bias"].chunk(2)[r]
        assert torch.equal(ours[p + "qkv_proj.bias"], torch.cat([q, k, v]))
        assert torch.equal(ours[p + "o_proj.bias"], tensors[p + "o_proj.bias"])  # 行并行：不切


@pytest.mark.parametrize(
    ("heads", "kv_heads", "size", "message"),
    [
        (4, 2, 3, "cannot split num_attention_heads=4 over tp=3"),
        (12, 4, 6, "cannot split num_key_value_heads=4 over tp=6"),
        (8, 8, 8, "cannot split intermediate_size=12 evenly over tp=8"),
    ],
)
def test_unsplittable_sizes(heads: int, kv_heads: int, size: int, message: str) -> None:
    config = ModelConfig.from_hf(small_hf(num_attention_heads=heads, num_key_value_heads=kv_heads))
    with pytest.raises(ValueError, match=message):
        plan_weights(config, DistributedInfo(0, size))


def test_dtype_and_device(small: tuple[Path, ModelConfig, Tensors]) -> None:
    path, config, tensors = small
    ours = load(path, config, dtype=torch.bfloat16, device="cpu")
    assert {t.dtype for t in ours.values()} == {torch.bfloat16}
    qkv = [tensors[f"model.layers.0.self_attn.{x}_proj.weight"] for x in "qkv"]
    assert torch.equal(
        ours["model.layers.0.self_attn.qkv_proj.weight"], torch.cat(qkv).to(torch.bfloat16)
    )


# ---------------------------------------------------------------- 报错


def broken(tmp_path: Path, edit: Any) -> tuple[Path, ModelConfig]:
    config = ModelConfig.from_hf(small_hf())
    tensors = random_tensors(config)
    edit(tensors)
    return write_checkpoint(tmp_path / "broken", small_hf(), tensors), config


def expect_error(path: Path, config: ModelConfig, *messages: str) -> None:
    """对账在读任何数据之前完成：第一次 next() 就报错，一个张量也没有交出去。"""
    weights = load_weights(path, config, DistributedInfo(0, 1))
    with pytest.raises(CheckpointError) as info:
        next(weights)
    for message in messages:
        assert message in str(info.value)


def test_missing_tensor(tmp_path: Path) -> None:
    path, config = broken(tmp_path, lambda t: t.pop("model.layers.1.self_attn.v_proj.weight"))
    expect_error(
        path,
        config,
        "does not match its config (Qwen3ForCausalLM)",
        "  1 missing tensor(s):\n    'model.layers.1.self_attn.v_proj.weight'",
    )


def test_unexpected_tensor(tmp_path: Path) -> None:
    def edit(tensors: Tensors) -> None:
        tensors["model.layers.2.mlp.up_proj.weight"] = torch.zeros(12, 8)

    path, config = broken(tmp_path, edit)
    expect_error(path, config, "1 unexpected tensor(s):\n    'model.layers.2.mlp.up_proj.weight'")


def test_wrong_shape(tmp_path: Path) -> None:
    def edit(tensors: Tensors) -> None:
        tensors["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(8, 8)

    path, config = broken(tmp_path, edit)
    expect_error(
        path,
        config,
        "1 tensor(s) with the wrong shape:\n    'model.layers.0.self_attn.k_proj.weight' "
        "in model.safetensors has shape (8, 8), config.json implies (4, 8)",
    )


def test_many_problems_are_listed_together(tmp_path: Path) -> None:
    """把 2 层的 checkpoint 当成 3 层加载：缺的张量一次列出来（多了就只列前几个）。"""
    config = ModelConfig.from_hf(small_hf())
    path = write_checkpoint(tmp_path / "model", small_hf(), random_tensors(config))
    three = ModelConfig.from_hf(small_hf(num_hidden_layers=3))
    expect_error(path, three, "11 missing tensor(s):\n    'model.layers.2.", "    ... and 6 more")
    one = ModelConfig.from_hf(small_hf(num_hidden_layers=1))
    expect_error(path, one, "11 unexpected tensor(s):\n    'model.layers.1.")
    # 三类问题同时出现时都列出来
    wrong = dataclasses.replace(three, num_kv_heads=1)
    expect_error(path, wrong, "11 missing", "4 tensor(s) with the wrong shape")


def test_ignored_tensors(tmp_path: Path) -> None:
    """共用词嵌入的模型多存了 lm_head、老 checkpoint 多存了 rotary_emb.inv_freq：忽略，不报错。"""
    hf = small_hf(tie_word_embeddings=True)
    config = ModelConfig.from_hf(hf)
    tensors = random_tensors(config)
    tensors["lm_head.weight"] = torch.zeros(10, 8)
    tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.zeros(1)
    ours = load(write_checkpoint(tmp_path / "model", hf, tensors), config)
    assert "lm_head.weight" not in ours and not any("inv_freq" in n for n in ours)


def test_file_level_errors(tmp_path: Path) -> None:
    config = ModelConfig.from_hf(small_hf())
    tensors = random_tensors(config)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="no \\*.safetensors files in"):
        Checkpoint(empty)
    twice = tmp_path / "twice"
    names = list(tensors)
    write_checkpoint(twice, small_hf(), tensors, shards=[names, names[:1]])
    with pytest.raises(CheckpointError, match="'model.embed_tokens.weight' appears in both"):
        Checkpoint(twice)
    lost = write_checkpoint(tmp_path / "lost", small_hf(), tensors, shards=[names[:5], names[5:]])
    (lost / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointError, match="lists files that are not in"):
        Checkpoint(lost)


# ---------------------------------------------------------------- 流式：内存里从不多出一份


class ReadTracker:
    """盯住加载器读出来的每一块、交出去的每一个张量：用弱引用记下它们什么时候被释放。

    每读一块之前，检查之前读出来的块、之前交出去的张量（调用方已经扔掉了）还有几个活着。
    加载器若攒着 q 等 v、或者生成器的局部变量拖住了上一个张量，这个数就会大于 0。
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.alive: dict[int, int] = {}  # 编号 -> 字节数
        self.max_alive_at_read = 0
        self.reads = 0
        self._ids = itertools.count()
        original = Checkpoint.read

        def read(checkpoint: Checkpoint, name: str, index: Any = ()) -> torch.Tensor:
            self.max_alive_at_read = max(self.max_alive_at_read, len(self.alive))
            self.reads += 1
            return self.track(original(checkpoint, name, index))

        monkeypatch.setattr(Checkpoint, "read", read)

    def track(self, tensor: torch.Tensor) -> torch.Tensor:
        key = next(self._ids)
        self.alive[key] = tensor.nbytes
        weakref.finalize(tensor, self.alive.pop, key, None)
        return tensor

    def consume(self, path: Path, config: ModelConfig, size: int, stats: LoadStats) -> list[str]:
        """像模型那样消费：拿到一个就"放进模型"（这里只记名字），不留引用。"""
        names = []
        for name, tensor in load_weights(path, config, DistributedInfo(0, size), stats=stats):
            names.append(name)
            self.track(tensor)
            del tensor
        return names


@pytest.mark.parametrize("size", [1, 2])
@pytest.mark.parametrize("name", TINY)
def test_streaming_holds_one_piece_at_a_time(
    models_dir: Path, name: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = models_dir / name
    config = ModelConfig.from_pretrained(path)
    tracker = ReadTracker(monkeypatch)
    stats = LoadStats()
    names = tracker.consume(path, config, size, stats)
    assert tracker.reads == len(checkpoint_shapes(config)) == stats.tensors_read
    assert tracker.max_alive_at_read == 0  # 读新的一块时，之前的块和交出去的张量都已释放
    assert len(names) == stats.tensors_yielded == len(plan_weights(config))
    assert stats.peak_bytes <= one_target_bound(config, size)


def one_target_bound(config: ModelConfig, size: int) -> int:
    """ "一个目标 + 它最大的一块"的字节数，取所有目标里最大的（float32，4 字节一个数）。"""
    bound = 0
    for target in plan_weights(config, DistributedInfo(0, size)):
        biggest_piece = 0
        for piece in target.pieces:
            # 一块的大小：目标里它占的位置（整个目标时 dst 为空）
            region = torch.empty(target.shape, device="meta")[piece.dst]
            biggest_piece = max(biggest_piece, region.numel())
        bound = max(bound, (math.prod(target.shape) + biggest_piece) * 4)
    return bound


def test_shard_order_does_not_matter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """故意把同一组的张量分散到不同文件：所有 q 在第 1 个文件、所有 v 在第 3 个文件。

    按文件顺序边读边合并的加载器，要把所有层的 q、k 攒到读第 3 个文件时才能合并；
    我们按计划逐个目标地读，结果和单文件完全一样，手里仍然最多只有一块。
    同一个文件夹里多放一个不在 index.json 里的 consolidated.safetensors，也不会被读。
    """
    config = ModelConfig.from_hf(small_hf(num_hidden_layers=4))
    tensors = random_tensors(config)
    first = [n for n in tensors if n.endswith(("q_proj.weight", "gate_proj.weight"))]
    third = [n for n in tensors if n.endswith(("v_proj.weight", "up_proj.weight"))]
    second = [n for n in tensors if n not in first + third]
    sharded = write_checkpoint(tmp_path / "sharded", small_hf(), tensors, [first, second, third])
    save_file({"junk": torch.zeros(1)}, str(sharded / "consolidated.safetensors"))
    single = write_checkpoint(tmp_path / "single", small_hf(), tensors)
    for size in (1, 2):
        expected = load(single, config, 0, size)
        tracker = ReadTracker(monkeypatch)
        stats = LoadStats()
        assert tracker.consume(sharded, config, size, stats) == list(expected)
        assert tracker.max_alive_at_read == 0
        # 这个模型没有一个特别大的张量（不像内嵌模型的词表）：同时拿着的不到整个模型的 1/5
        assert stats.peak_bytes <= one_target_bound(config, size) < stats.bytes_yielded / 5
        got = load(sharded, config, 0, size)
        assert all(torch.equal(got[n], expected[n]) for n in expected)
