"""第 3 章：带词表区间掩码的查表、词表并行的 embedding（词表不能被 tp 整除），
以及只为每个请求最后一个 token 算 logits 的 LM head。"""

from __future__ import annotations

import contextlib
from typing import Iterator

import pytest
import torch
import torch.nn.functional as F

from minisgl.distributed import reset_tp_info, set_tp_info
from minisgl.kernel import indexing
from minisgl.layers import ParallelLMHead, VocabParallelEmbedding

VOCAB, HIDDEN = 10, 6


@contextlib.contextmanager
def as_rank(rank: int, size: int) -> Iterator[None]:
    reset_tp_info()
    set_tp_info(rank, size)
    try:
        yield
    finally:
        reset_tp_info()


def shard_rows(full: torch.Tensor, rank: int, tp: int, fill: float = 0.0) -> torch.Tensor:
    """按词表行切第 rank 段；最后一段不够 ceil(V / tp) 行时用 fill 补齐（加载器补 0）。"""
    per = -(-full.shape[0] // tp)
    part = full[min(rank * per, len(full)) : (rank + 1) * per]
    pad = torch.full((per - part.shape[0], *full.shape[1:]), fill, dtype=full.dtype)
    return torch.cat([part, pad])


def test_indexing_without_range_is_f_embedding() -> None:
    torch.manual_seed(0)
    w = torch.randn(VOCAB, HIDDEN)
    ids = torch.tensor([3, 0, 9, 3])
    assert torch.equal(indexing(w, ids), F.embedding(ids, w))


def test_indexing_with_range_zeroes_foreign_tokens() -> None:
    torch.manual_seed(0)
    local = torch.randn(4, HIDDEN)  # 持有 token 4..7
    ids = torch.tensor([0, 4, 7, 8, 5, 9])
    before = ids.clone()
    out = indexing(local, ids, vocab_range=(4, 8))
    assert torch.equal(ids, before)  # 不改调用方的 ids
    for row, t in enumerate(ids.tolist()):
        want = local[t - 4] if 4 <= t < 8 else torch.zeros(HIDDEN)
        assert torch.equal(out[row], want), t


def test_indexing_rejects_a_range_larger_than_the_shard() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        indexing(torch.zeros(4, 2), torch.tensor([0]), vocab_range=(0, 5))


@pytest.mark.parametrize(
    ("vocab", "tp", "ranges"),
    [
        (10, 2, [(0, 5), (5, 10)]),
        (10, 3, [(0, 4), (4, 8), (8, 10)]),  # 最后一个 rank：2 个真 token + 2 行补齐
        (10, 4, [(0, 3), (3, 6), (6, 9), (9, 10)]),
        (5, 4, [(0, 2), (2, 4), (4, 5), (5, 5)]),  # 最后一个 rank 一个真 token 也没有
    ],
)
def test_vocab_parallel_embedding_with_uneven_vocab(
    vocab: int, tp: int, ranges: list[tuple[int, int]]
) -> None:
    """V 分给 tp 个 rank：每个 rank ceil(V / tp) 行，不够的 rank 末尾是补出来的行。"""
    torch.manual_seed(0)
    full = torch.randn(vocab, HIDDEN)
    ids = torch.randint(0, vocab, (20,))
    partials = []
    for r in range(tp):
        with as_rank(r, tp):
            emb = VocabParallelEmbedding(vocab, HIDDEN)
        assert emb.vocab_range == ranges[r]
        # 补齐的行填一个离谱的数：如果它漏进了结果，下面的比较一定失败
        emb.load_state_dict({"weight": shard_rows(full, r, tp, fill=1e9)})
        partials.append(emb.forward_local(ids))
    torch.testing.assert_close(sum(partials), F.embedding(ids, full), rtol=0, atol=0)


def test_embedding_tp1_has_the_whole_vocab() -> None:
    torch.manual_seed(0)
    emb = VocabParallelEmbedding(VOCAB, HIDDEN)
    full = torch.randn(VOCAB, HIDDEN)
    emb.load_state_dict({"weight": full})
    assert emb.vocab_range == (0, VOCAB)
    ids = torch.tensor([9, 0, 5])
    assert torch.equal(emb(ids), full[ids])


def test_lm_head_computes_only_the_last_token_of_each_request() -> None:
    torch.manual_seed(0)
    head = ParallelLMHead(VOCAB, HIDDEN, bias=True)
    w, b = torch.randn(VOCAB, HIDDEN), torch.randn(VOCAB)
    head.load_state_dict({"weight": w, "bias": b})
    # 三个请求一起 prefill，长度 3、1、4：隐状态按请求首尾相接，共 8 行
    lengths = torch.tensor([3, 1, 4])
    x = torch.randn(int(lengths.sum()), HIDDEN)
    last = torch.cumsum(lengths, 0) - 1
    assert last.tolist() == [2, 3, 7]
    logits = head(x, last)
    assert logits.shape == (3, VOCAB)
    torch.testing.assert_close(logits, F.linear(x[[2, 3, 7]], w, b))
    # decode：每个请求只有一个 token，不需要挑
    torch.testing.assert_close(head(x[:3]), F.linear(x[:3], w, b))


def test_tied_lm_head_has_no_weight_of_its_own() -> None:
    torch.manual_seed(0)
    emb = VocabParallelEmbedding(VOCAB, HIDDEN)
    head = ParallelLMHead(VOCAB, HIDDEN, tied_embedding=emb)
    assert head.state_dict() == {}  # lm_head.weight 不存在：它就是 embed_tokens.weight
    full = torch.randn(VOCAB, HIDDEN)
    emb.load_state_dict({"weight": full})  # 换掉 embedding 的权重，LM head 跟着变
    x = torch.randn(2, HIDDEN)
    torch.testing.assert_close(head(x), x @ full.T)


@pytest.mark.parametrize("tp", [2, 3, 4])
def test_lm_head_tp_gather_then_trim(tp: int) -> None:
    """各 rank 算自己那段词表的 logits，按 rank 顺序拼起来（all_gather），切掉补齐的尾巴。"""
    torch.manual_seed(0)
    full = torch.randn(VOCAB, HIDDEN)
    x = torch.randn(9, HIDDEN)
    last = torch.tensor([1, 4, 8])
    pieces = []
    for r in range(tp):
        with as_rank(r, tp):
            head = ParallelLMHead(VOCAB, HIDDEN)
        head.load_state_dict({"weight": shard_rows(full, r, tp)})
        pieces.append(head.forward_local(x, last))
    gathered = torch.cat(pieces, dim=-1)
    assert gathered.shape == (3, -(-VOCAB // tp) * tp)
    torch.testing.assert_close(gathered[:, :VOCAB], F.linear(x[last], full))
