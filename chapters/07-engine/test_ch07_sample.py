"""第 7 章：采样器。贪心等于 argmax；抽到的 token 不出 top-k / top-p 的候选集合；
同一个种子抽到同样的 token；一批里贪心和采样的请求互不干扰。"""

from __future__ import annotations

import torch

from minisgl.core import SamplingParams
from minisgl.engine import BatchSamplingArgs, Sampler, top_k_top_p_mask

VOCAB = 50


def _logits(bs: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(bs, VOCAB, generator=g) * 3


def _args(params: list[SamplingParams]) -> BatchSamplingArgs:
    return BatchSamplingArgs.from_params(params, VOCAB, "cpu")


def test_greedy_is_argmax() -> None:
    logits = _logits(6)
    args = _args([SamplingParams()] * 6)
    assert args.all_greedy  # 快路径：不建任何张量
    out = Sampler("cpu").sample(logits, args)
    assert out.tolist() == logits.argmax(-1).tolist()
    # top_k=1 也是贪心，哪怕温度很高
    args = _args([SamplingParams(temperature=5.0, top_k=1)] * 6)
    assert args.all_greedy
    assert Sampler("cpu").sample(logits, args).tolist() == logits.argmax(-1).tolist()


def test_top_k_never_leaves_the_top_k() -> None:
    logits = _logits(4)
    k = 5
    allowed = logits.topk(k, dim=-1).indices
    sampler = Sampler("cpu", seed=1)
    args = _args([SamplingParams(temperature=10.0, top_k=k)] * 4)  # 高温：尾部也有不小的概率
    seen: set[int] = set()
    for _ in range(200):
        out = sampler.sample(logits, args)
        for row, token in enumerate(out.tolist()):
            assert token in allowed[row].tolist()
            seen.add(token)
    assert len(seen) > 4  # 真的在抽样，不是每次都取最大的


def test_top_p_never_leaves_the_nucleus() -> None:
    logits = _logits(3, seed=2)
    p = 0.6
    probs = logits.softmax(-1)
    sorted_p, order = probs.sort(-1, descending=True)
    nucleus = []
    for row in range(3):
        # 候选：按概率从大到小，加上自己之前累计还没到 p 的那些
        before = sorted_p[row].cumsum(0) - sorted_p[row]
        nucleus.append(set(order[row][before < p].tolist()))
    sampler = Sampler("cpu", seed=3)
    args = _args([SamplingParams(temperature=1.0, top_p=p)] * 3)
    for _ in range(200):
        for row, token in enumerate(sampler.sample(logits, args).tolist()):
            assert token in nucleus[row]


def test_mask_keeps_the_best_token_and_handles_per_row_parameters() -> None:
    logits = _logits(3, seed=4)
    keep = top_k_top_p_mask(logits, torch.tensor([1, 3, VOCAB]), torch.tensor([1.0, 1.0, 1e-6]))
    assert keep.sum(-1).tolist() == [1, 3, 1]  # top_p 再小也至少留下最好的那个
    assert keep[torch.arange(3), logits.argmax(-1)].all()


def test_same_seed_same_tokens() -> None:
    logits = _logits(8, seed=5)
    args = _args([SamplingParams(temperature=1.5, top_k=20, top_p=0.9)] * 8)
    s1, s2, s3 = Sampler("cpu", seed=42), Sampler("cpu", seed=42), Sampler("cpu", seed=7)
    run1 = [s1.sample(logits, args).tolist() for _ in range(5)]
    run2 = [s2.sample(logits, args).tolist() for _ in range(5)]
    run3 = [s3.sample(logits, args).tolist() for _ in range(5)]
    assert run1 == run2
    assert len({tuple(r) for r in run1}) > 1  # 生成器的状态在前进：连续几次抽样并不相同
    assert run1 != run3  # 换一个种子（几乎必然）换一串结果


def test_mixed_greedy_and_sampled_in_one_batch() -> None:
    logits = _logits(4, seed=6)
    params = [
        SamplingParams(),  # 贪心
        SamplingParams(temperature=2.0, top_k=3),
        SamplingParams(temperature=0.0),  # 贪心
        SamplingParams(temperature=1.0, top_p=0.5),
    ]
    args = _args(params)
    assert not args.all_greedy and args.greedy is not None
    assert args.greedy.tolist() == [True, False, True, False]
    sampler = Sampler("cpu", seed=0)
    top3 = logits[1].topk(3).indices.tolist()
    seen_row1: set[int] = set()
    for _ in range(100):
        out = sampler.sample(logits, args).tolist()
        assert out[0] == logits[0].argmax().item() and out[2] == logits[2].argmax().item()
        assert out[1] in top3
        seen_row1.add(out[1])
    assert len(seen_row1) > 1
