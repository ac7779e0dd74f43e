"""流式加载 safetensors 权重：先对账，再一个张量一个张量地读、拼、切、交出去。

Hugging Face 的 checkpoint 按 transformers 的模块命名：每层有 ``q_proj``、``k_proj``、``v_proj``
三个投影和 ``gate_proj``、``up_proj`` 两个投影，MoE 的每个专家各有一套。推理引擎为了少发几次
矩阵乘，把 q/k/v 合成一个 ``qkv_proj``、gate/up 合成一个 ``gate_up_proj``、同一层的专家叠成一个
三维张量；张量并行时每个 rank 只要其中属于自己的那几行或几列。这个模块负责从前者得到后者。

做法分三步：

1. **对账**（``Checkpoint`` + ``check_checkpoint``）：safetensors 文件开头是一张目录——每个张量的
   名字、dtype、形状和在文件里的位置。只读目录、不读数据，就能把 checkpoint 和 ``config.json``
   对一遍：缺了哪个、多了哪个、哪个形状不对，在读任何数据之前就报出来，并说出张量的名字。
2. **计划**（``plan_weights``）：对每个要交出去的张量，写下它由哪几块拼成——从 checkpoint 的
   哪个张量、取哪几行哪几列、放进目标的什么位置。切分规则全在这里，是不碰文件的纯计算。
3. **执行**（``load_weights``）：按计划逐个目标地读。safetensors 可以随机访问，``get_slice`` 只取
   这个 rank 需要的那几行几列，文件的顺序、一组张量分在几个文件里都无所谓；拼好一个就 ``yield``
   一个。加载器手里最多只有"正在拼的那一个目标 + 刚读出来的一块"，从不同时拿着两份模型。

对外交出的名字（每层的前缀是 ``model.layers.{i}.``）：

- ``self_attn.qkv_proj.weight``：本 rank 的 q 行、k 行、v 行依次拼接；KV 头比 rank 少时，
  第 r 个 rank 拿第 ``r * num_kv_heads // tp`` 个 KV 头（相邻的 rank 共用一个头的副本）；
- ``self_attn.o_proj.weight``：按输入列切（行并行）；``q_norm``、``k_norm`` 各 rank 一样；
- ``mlp.gate_up_proj.weight``：gate 行在前、up 行在后；``mlp.down_proj.weight`` 按列切；
- MoE 层：``mlp.gate.weight``（路由器，各 rank 一样）、``mlp.experts.gate_up_proj``
  （E, 2·I/tp, H）、``mlp.experts.down_proj``（E, H, I/tp），专家按编号叠放；
- ``model.embed_tokens.weight`` 和 ``lm_head.weight``：按词表的行切，每个 rank
  ``ceil(vocab / tp)`` 行；词表不能被 tp 整除时，最后的 rank 末尾补几行 0；
- 词嵌入与 LM head 共用（``tie_word_embeddings``）时**不**交出 ``lm_head.weight``：由模型
  让 LM head 直接用词嵌入的那个张量（第 5 章），而不是在内存里再放一份拷贝。
  这样的 checkpoint 里即使存了 ``lm_head.weight`` 也会被忽略，和 transformers 的做法一致；
- 带 bias 的模型（``attention_bias``），bias 按同样的规则合并、切分；``o_proj`` 的 bias 在
  各 rank 一样（行并行的层在 all-reduce 之后加一次 bias）。
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Iterator

import torch
from safetensors import safe_open

from minisgl.distributed import DistributedInfo, get_tp_info
from minisgl.utils import div_ceil, div_even, resolve_model_path

from .config import ModelConfig

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "LoadStats",
    "Piece",
    "Target",
    "check_checkpoint",
    "checkpoint_shapes",
    "load_weights",
    "plan_weights",
]

Index = tuple[slice, ...]
Shape = tuple[int, ...]

# safetensors 文件头里的 dtype 名字
_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
# 可以出现在 checkpoint 里、但推理用不到的张量：老的 Llama checkpoint 把 RoPE 的 inv_freq 也存了
_IGNORED = re.compile(r".*\.rotary_emb\.inv_freq")
_SHOW = 5  # 错误信息里每一类问题最多列出几个名字


class CheckpointError(ValueError):
    """checkpoint 和 config.json 对不上：缺张量、多张量、形状不对、文件不全。"""


# ---------------------------------------------------------------- 1. 对账


def checkpoint_shapes(config: ModelConfig) -> dict[str, Shape]:
    """按 ``config.json``，checkpoint 里应该有哪些张量、各是什么形状（HF 的名字，完整形状）。

    这张表只用到 ModelConfig，不碰任何文件：对账用它，算参数量也用它。顺序是前向的顺序。
    """
    c = config
    hidden, head_dim = c.hidden_size, c.head_dim
    q_size, kv_size = c.num_qo_heads * head_dim, c.num_kv_heads * head_dim
    shapes: dict[str, Shape] = {"model.embed_tokens.weight": (c.vocab_size, hidden)}
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (hidden,)
        attn = {"q_proj": q_size, "k_proj": kv_size, "v_proj": kv_size}
        for name, rows in attn.items():
            shapes[f"{p}self_attn.{name}.weight"] = (rows, hidden)
            if c.attention_bias:
                shapes[f"{p}self_attn.{name}.bias"] = (rows,)
        if c.has_qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = (head_dim,)
            shapes[p + "self_attn.k_norm.weight"] = (head_dim,)
        shapes[p + "self_attn.o_proj.weight"] = (hidden, q_size)
        if c.attention_bias:
            shapes[p + "self_attn.o_proj.bias"] = (hidden,)
        shapes[p + "post_attention_layernorm.weight"] = (hidden,)
        if c.is_moe_layer(i):
            inter = c.moe_intermediate_size
            shapes[p + "mlp.gate.weight"] = (c.num_experts, hidden)
            for e in range(c.num_experts):
                shapes[f"{p}mlp.experts.{e}.gate_proj.weight"] = (inter, hidden)
                shapes[f"{p}mlp.experts.{e}.up_proj.weight"] = (inter, hidden)
                shapes[f"{p}mlp.experts.{e}.down_proj.weight"] = (hidden, inter)
        else:
            inter = c.intermediate_size
            shapes[p + "mlp.gate_proj.weight"] = (inter, hidden)
            shapes[p + "mlp.up_proj.weight"] = (inter, hidden)
            shapes[p + "mlp.down_proj.weight"] = (hidden, inter)
    shapes["model.norm.weight"] = (hidden,)
    if not c.tie_word_embeddings:
        shapes["lm_head.weight"] = (c.vocab_size, hidden)
    return shapes


class Checkpoint:
    """一个模型文件夹里的全部 safetensors 文件。打开时只读每个文件开头的目录（名字、dtype、
    形状、位置），数据要等 ``read`` 时才从磁盘读，所以再大的 checkpoint 也能瞬间打开、对账。
    用 ``with`` 打开，退出时关闭所有文件。
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.files = _shard_files(self.folder)
        self._stack = contextlib.ExitStack()
        self._handles: dict[str, Any] = {}  # 张量名 -> 所在文件的句柄
        self._file_of: dict[str, str] = {}
        self._meta: dict[str, tuple[Shape, torch.dtype]] = {}
        try:
            for file in self.files:
                handle = self._stack.enter_context(safe_open(file, framework="pt"))
                for name in handle.keys():
                    if name in self._file_of:
                        raise CheckpointError(
                            f"tensor {name!r} appears in both {self._file_of[name]} and {file.name}"
                        )
                    info = handle.get_slice(name)
                    self._handles[name] = handle
                    self._file_of[name] = file.name
                    self._meta[name] = (tuple(info.get_shape()), _DTYPES[info.get_dtype()])
        except BaseException:
            self._stack.close()
            raise

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._stack.close()

    @property
    def names(self) -> list[str]:
        return list(self._meta)

    def shape(self, name: str) -> Shape:
        return self._meta[name][0]

    def dtype(self, name: str) -> torch.dtype:
        return self._meta[name][1]

    def nbytes(self, name: str) -> int:
        shape, dtype = self._meta[name]
        return _numel(shape) * dtype.itemsize

    def file_of(self, name: str) -> str:
        return self._file_of[name]

    def read(self, name: str, index: Index = ()) -> torch.Tensor:
        """读张量 ``name`` 的 ``index`` 部分（例如 ``(slice(0, 64),)`` 是前 64 行）；
        index 为空时读整个张量。只有被选中的字节才会从磁盘读进内存。"""
        handle = self._handles[name]
        if not index:
            return handle.get_tensor(name)
        return handle.get_slice(name)[index]


def _shard_files(folder: Path) -> list[Path]:
    """checkpoint 由哪些文件组成。大模型分成多个文件，``model.safetensors.index.json`` 里的
    ``weight_map`` 说明每个张量在哪个文件；有它就以它为准（同一文件夹里可能还有别的
    safetensors，例如 Mistral 的 consolidated.safetensors 是同一份权重的另一种命名）。"""
    if not folder.is_dir():
        raise CheckpointError(f"model folder {folder} does not exist")
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        with open(index, encoding="utf-8") as f:
            weight_map: dict[str, str] = json.load(f)["weight_map"]
        files = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise CheckpointError(f"{index.name} lists files that are not in {folder}: {missing}")
        return files
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors files in {folder}")
    return files


def check_checkpoint(checkpoint: Checkpoint, config: ModelConfig) -> None:
    """checkpoint 的目录和 ``config.json`` 对账；对不上就抛 CheckpointError，列出所有问题。"""
    expected = checkpoint_shapes(config)
    present = set(checkpoint.names)
    ignored = {n for n in present if n not in expected and _ignorable(n, config)}
    missing = [n for n in expected if n not in present]
    unexpected = sorted(present - set(expected) - ignored)
    misshaped = [
        f"{n!r} in {checkpoint.file_of(n)} has shape {checkpoint.shape(n)}, "
        f"config.json implies {expected[n]}"
        for n in expected
        if n in present and checkpoint.shape(n) != expected[n]
    ]
    problems = [
        (f"{len(missing)} missing tensor(s):", [repr(n) for n in missing]),
        (f"{len(unexpected)} unexpected tensor(s):", [repr(n) for n in unexpected]),
        (f"{len(misshaped)} tensor(s) with the wrong shape:", misshaped),
    ]
    lines = [f"checkpoint {checkpoint.folder} does not match its config ({config.architecture}):"]
    for title, items in problems:
        if items:
            lines.append("  " + title)
            lines += [f"    {item}" for item in items[:_SHOW]]
            if len(items) > _SHOW:
                lines.append(f"    ... and {len(items) - _SHOW} more")
    if len(lines) > 1:
        raise CheckpointError("\n".join(lines))


def _ignorable(name: str, config: ModelConfig) -> bool:
    return bool(_IGNORED.fullmatch(name)) or (
        name == "lm_head.weight" and config.tie_word_embeddings
    )


# ---------------------------------------------------------------- 2. 计划


@dataclass(frozen=True)
class Piece:
    """目标张量里的一块：checkpoint 里的张量 ``source`` 取 ``src`` 这一部分，
    放到目标的 ``dst`` 位置。"""

    source: str
    src: Index  # 在源张量上取哪些行/列；空元组表示整个张量
    dst: tuple[int | slice, ...]  # 放进目标张量的哪里；空元组表示整个目标

    def __str__(self) -> str:
        return f"{self.source}{_format_index(self.src)}"


@dataclass(frozen=True)
class Target:
    """加载器交出去的一个张量：名字、本 rank 上的形状、由哪几块拼成。

    ``pad`` 为真时，各块没有盖满整个目标（词表补齐的那几行），其余位置是 0。
    """

    name: str
    shape: Shape
    pieces: tuple[Piece, ...]
    pad: bool = False

    def __str__(self) -> str:
        parts = " + ".join(str(p) for p in self.pieces)
        return f"{self.name} {list(self.shape)} <- {parts}" + (" + 0" if self.pad else "")


def plan_weights(config: ModelConfig, tp_info: DistributedInfo | None = None) -> list[Target]:
    """第 ``tp_info.rank`` 个 rank 要加载哪些张量、每个由哪几块拼成。纯计算，不碰文件。

    规则：q/k/v、gate/up、专家的 gate/up 按输出行切（列并行）；o_proj、down_proj、专家的
    down 按输入列切（行并行）；词嵌入和 LM head 按词表的行切；norm、路由器各 rank 一样。
    头数、中间维度分不均时报错（KV 头比 rank 少时复制，见 ``_head_range``）。
    """
    tp = tp_info if tp_info is not None else get_tp_info()
    c = config
    hidden, head_dim = c.hidden_size, c.head_dim
    q0, q1 = _head_range(c.num_qo_heads, tp, "num_attention_heads")
    k0, k1 = _head_range(c.num_kv_heads, tp, "num_key_value_heads", allow_replicate=True)
    q_rows = slice(q0 * head_dim, q1 * head_dim)
    kv_rows = slice(k0 * head_dim, k1 * head_dim)

    targets = [_vocab_target("model.embed_tokens.weight", c, tp)]
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        attn = p + "self_attn."
        targets.append(_whole(p + "input_layernorm.weight", (hidden,)))
        kinds = ["weight", "bias"] if c.attention_bias else ["weight"]
        for kind in kinds:  # q 行、k 行、v 行依次拼成 qkv_proj
            rows = {"q": q_rows, "k": kv_rows, "v": kv_rows}
            sources = [(f"{attn}{n}_proj.{kind}", rows[n]) for n in "qkv"]
            targets.append(_concat_rows(f"{attn}qkv_proj.{kind}", sources, hidden, kind))
        if c.has_qk_norm:
            targets.append(_whole(attn + "q_norm.weight", (head_dim,)))
            targets.append(_whole(attn + "k_norm.weight", (head_dim,)))
        o_cols = q_rows  # o_proj 的输入正是本 rank 的那几个 Q 头的输出
        o_shape = (hidden, o_cols.stop - o_cols.start)
        o_piece = Piece(attn + "o_proj.weight", (slice(None), o_cols), ())
        targets.append(Target(attn + "o_proj.weight", o_shape, (o_piece,)))
        if c.attention_bias:
            targets.append(_whole(attn + "o_proj.bias", (hidden,)))
        targets.append(_whole(p + "post_attention_layernorm.weight", (hidden,)))
        if c.is_moe_layer(i):
            targets += _moe_targets(p + "mlp.", c, tp)
        else:
            i0, i1 = _even_range(c.intermediate_size, tp, "intermediate_size")
            rows = slice(i0, i1)
            gate_up = [(p + "mlp.gate_proj.weight", rows), (p + "mlp.up_proj.weight", rows)]
            targets.append(_concat_rows(p + "mlp.gate_up_proj.weight", gate_up, hidden, "weight"))
            down = Piece(p + "mlp.down_proj.weight", (slice(None), rows), ())
            targets.append(Target(p + "mlp.down_proj.weight", (hidden, i1 - i0), (down,)))
    targets.append(_whole("model.norm.weight", (hidden,)))
    if not c.tie_word_embeddings:
        targets.append(_vocab_target("lm_head.weight", c, tp))
    return targets


def _even_range(total: int, tp: DistributedInfo, what: str) -> tuple[int, int]:
    """把 ``total`` 均分给 tp 个 rank，返回本 rank 的 [start, stop)。"""
    try:
        per = div_even(total, tp.size)
    except ValueError:
        raise ValueError(f"cannot split {what}={total} evenly over tp={tp.size}") from None
    return tp.rank * per, (tp.rank + 1) * per


def _head_range(
    num_heads: int, tp: DistributedInfo, what: str, allow_replicate: bool = False
) -> tuple[int, int]:
    """本 rank 拿第几个到第几个头 [start, stop)。

    头数够分时按顺序连续切；KV 头比 rank 少时每个 rank 放 1 个头：第 ``rank * num_heads // tp``
    个，相邻的 ``tp // num_heads`` 个 rank 共用同一个头。这样本 rank 的 Q 头（连续切分）恰好都
    属于它本地的那个 KV 头的分组（GQA）。够分时这个公式也正好给出 ``rank * (num_heads // tp)``。
    """
    try:
        per = div_even(num_heads, tp.size, allow_replicate=allow_replicate)
    except ValueError as e:
        raise ValueError(f"cannot split {what}={num_heads} over tp={tp.size}: {e}") from None
    start = tp.rank * num_heads // tp.size
    return start, start + per


def _whole(name: str, shape: Shape) -> Target:
    """各 rank 一样的张量（norm、路由器、行并行层的 bias）：整个读进来。"""
    return Target(name, shape, (Piece(name, (), ()),))


def _concat_rows(name: str, sources: list[tuple[str, slice]], hidden: int, kind: str) -> Target:
    """把几个源张量各自的一段行，按顺序上下拼成一个目标（qkv_proj、gate_up_proj）。"""
    pieces, offset = [], 0
    for source, rows in sources:
        n = rows.stop - rows.start
        pieces.append(Piece(source, (rows,), (slice(offset, offset + n),)))
        offset += n
    shape = (offset, hidden) if kind == "weight" else (offset,)
    return Target(name, shape, tuple(pieces))


def _moe_targets(prefix: str, c: ModelConfig, tp: DistributedInfo) -> list[Target]:
    """一个 MoE 层：路由器各 rank 一样；每个专家的 gate/up/down 像稠密 MLP 一样切，
    再按专家编号叠起来。"""
    i0, i1 = _even_range(c.moe_intermediate_size, tp, "moe_intermediate_size")
    rows, n = slice(i0, i1), i1 - i0
    gate_up: list[Piece] = []
    down: list[Piece] = []
    for e in range(c.num_experts):
        expert = f"{prefix}experts.{e}."
        gate_up.append(Piece(expert + "gate_proj.weight", (rows,), (e, slice(0, n))))
        gate_up.append(Piece(expert + "up_proj.weight", (rows,), (e, slice(n, 2 * n))))
        down.append(Piece(expert + "down_proj.weight", (slice(None), rows), (e,)))
    experts, hidden = c.num_experts, c.hidden_size
    return [
        _whole(prefix + "gate.weight", (experts, hidden)),
        Target(prefix + "experts.gate_up_proj", (experts, 2 * n, hidden), tuple(gate_up)),
        Target(prefix + "experts.down_proj", (experts, hidden, n), tuple(down)),
    ]


def _vocab_target(name: str, c: ModelConfig, tp: DistributedInfo) -> Target:
    """词嵌入 / LM head：每个 rank ``ceil(vocab / tp)`` 行，最后几个 rank 不够的部分补 0。

    补的是 0 而不是别的：LM head 在补齐的行上算出的 logit 是 0，第 3 章在把各 rank 的
    logits 拼起来之后把它们截掉；词嵌入的这几行永远不会被查到（token id 都小于 vocab）。
    """
    per = div_ceil(c.vocab_size, tp.size)
    start = min(tp.rank * per, c.vocab_size)
    stop = min(start + per, c.vocab_size)
    piece = Piece(name, (slice(start, stop),), (slice(0, stop - start),))
    return Target(name, (per, c.hidden_size), (piece,), pad=stop - start < per)


def _format_index(index: Index) -> str:
    if not index:
        return ""
    parts = [":" if s == slice(None) else f"{s.start}:{s.stop}" for s in index]
    return "[" + ", ".join(parts) + "]"


# ---------------------------------------------------------------- 3. 执行


@dataclass
class LoadStats:
    """一次加载的账本：读了多少、交出去多少、加载器自己最多同时拿着多少字节。"""

    tensors_read: int = 0  # 读了多少块（一个目标可能由几块拼成）
    bytes_read: int = 0
    tensors_yielded: int = 0
    bytes_yielded: int = 0
    peak_bytes: int = 0  # 加载器同时拿着的最多字节数：正在拼的目标 + 刚读出来的一块


def load_weights(
    model_path: str | Path,
    config: ModelConfig,
    tp_info: DistributedInfo | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    *,
    stats: LoadStats | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """逐个交出 ``(名字, 张量)``：已经合并、切好、转成 ``dtype``、放在 ``device`` 上。

    ``model_path`` 是本地文件夹或 Hub 上的名字；``tp_info`` 默认取 ``get_tp_info()``；
    ``dtype`` 默认保持 checkpoint 里的精度；``device`` 默认 CPU。
    在读任何数据之前先对账，checkpoint 和 config 对不上时抛 CheckpointError。
    调用方每拿到一个张量就该把它放进模型、丢掉自己的引用，这样整个过程里内存中只多出一个张量。
    """
    folder = resolve_model_path(model_path)
    targets = plan_weights(config, tp_info)  # 先算计划：头数分不均等错误在打开文件之前报出
    with Checkpoint(folder) as checkpoint:
        check_checkpoint(checkpoint, config)
        for target in targets:
            tensor = _build(target, checkpoint, dtype, device, stats)
            if stats is not None:
                stats.tensors_yielded += 1
                stats.bytes_yielded += tensor.nbytes
            yield target.name, tensor
            # 生成器暂停时，局部变量一直活着：不删掉的话，拼下一个目标时上一个还在内存里
            del tensor


def _build(
    target: Target,
    checkpoint: Checkpoint,
    dtype: torch.dtype | None,
    device: torch.device | str | None,
    stats: LoadStats | None,
) -> torch.Tensor:
    """按计划拼出一个目标：先分配好目标张量，再把每一块读出来、拷进它的位置。

    ``copy_`` 顺带完成 dtype 转换和搬到 device；每一块用完就扔。不需要先把 q、k、v 都读出来
    再 ``torch.cat``——那样同一层的 qkv 会在内存里有两份。交出去的总是一个新分配的、连续的
    张量：safetensors 读出来的块可能只是文件映射（mmap）上的一个视图，按列切的还不连续，
    不能直接交给模型长期持有。
    """
    dtype = dtype or checkpoint.dtype(target.pieces[0].source)
    allocate = torch.zeros if target.pad else torch.empty
    out = allocate(target.shape, dtype=dtype, device=device)
    for piece in target.pieces:
        part = checkpoint.read(piece.source, piece.src)
        out[piece.dst].copy_(part)
        if stats is not None:
            stats.tensors_read += 1
            stats.bytes_read += part.nbytes
            stats.peak_bytes = max(stats.peak_bytes, out.nbytes + part.nbytes)
        del part
    return out


def _numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
