"""采样：从每个请求的 logits 里挑出下一个 token。

一个批次里的请求各有各的采样参数（``SamplingParams``：温度、top-k、top-p）。
我们不按请求逐个采样，而是把参数排成和批次等长的张量，整批一起算：

1. 全是贪心（温度 0）的批次走快路径：``argmax``，不排序、不用随机数；
2. 否则：logits 除以各自的温度 → 按 top-k、top-p 把候选之外的位置设成 -inf →
   softmax → 用 ``torch.Generator`` 抽样；贪心的那几行最后用 ``argmax`` 覆盖。

随机数只来自 Engine 持有的一个 ``torch.Generator``：同一个种子、同样的批次，抽到的 token
相同，测试和复现问题都靠它。
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from minisgl.core import SamplingParams
from minisgl.utils.device import to_device

__all__ = ["BatchSamplingArgs", "Sampler", "top_k_top_p_mask"]
# >> ch16
import random

__all__ += ["seeded_uniform"]
# << ch16


@dataclass
class BatchSamplingArgs:
    """一个批次的采样参数，排成张量。``temperatures`` 为 None 表示整批贪心。"""

    temperatures: torch.Tensor | None  # (bs,) float32；贪心的行填 1（除了也不变）
    top_k: torch.Tensor | None  # (bs,) int64；不限制的行填 vocab_size；整批不限制时为 None
    top_p: torch.Tensor | None  # (bs,) float32；整批都是 1.0 时为 None
    greedy: torch.Tensor | None  # (bs,) bool：哪些行取 argmax
    # >> ch16
    seeded: torch.Tensor | None = None  # (bs,) bool：哪些行带 seed（第 16 章）
    uniforms: torch.Tensor | None = None  # (bs,) float32：带 seed 的行这一步用的随机数
    # << ch16

    @property
    def all_greedy(self) -> bool:
        return self.temperatures is None

    @classmethod
    def from_params(
        cls,
        params: Sequence[SamplingParams],
        vocab_size: int,
        device: torch.device | str,
        # >> ch16
        positions: Sequence[int] | None = None,  # 每行新 token 的位置：带 seed 的行要用
        # << ch16
    ) -> BatchSamplingArgs:
        """在主机上把每个请求的参数排好，一次拷到设备上。"""
        greedy = [p.is_greedy for p in params]
        if all(greedy):
            return cls(None, None, None, None)
        temps = [1.0 if g else p.temperature for p, g in zip(params, greedy)]
        top_k = [vocab_size if p.top_k <= 0 else min(p.top_k, vocab_size) for p in params]
        # top_p 太小、float32 表示不了（变成 0）时，一个候选都留不下；抬到 float32 最小的正规数，
        # 效果不变：仍然只留概率最大的那一个
        for p in params:
            if not 0.0 < p.top_p <= 1.0:
                raise ValueError(f"top_p must be in (0, 1], got {p.top_p}")
        tiny = torch.finfo(torch.float32).tiny
        top_p = [max(p.top_p, tiny) for p in params]

        def put(values: list, dtype: torch.dtype) -> torch.Tensor:
            return to_device(torch.tensor(values, dtype=dtype), device)  # 锁页 + 异步拷贝

        return cls(
            temperatures=put(temps, torch.float32),
            top_k=None if all(k == vocab_size for k in top_k) else put(top_k, torch.int64),
            top_p=None if all(p == 1.0 for p in top_p) else put(top_p, torch.float32),
            greedy=put(greedy, torch.bool),
            # >> ch16
            **_seeded_rows(params, greedy, positions, device),
            # << ch16
        )


def top_k_top_p_mask(
    logits: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None
) -> torch.Tensor:
    """返回一个布尔掩码 ``(bs, vocab)``：True 是保留下来的候选。

    按 logits 从大到小排序后：排名 ``< top_k`` 的留下；累计概率在加上自己**之前**还没到
    ``top_p`` 的留下——所以概率最大的那个 token 总会留下，候选集合永远不空。
    """
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    keep_sorted = torch.ones_like(sorted_logits, dtype=torch.bool)
    if top_k is not None:
        rank = torch.arange(logits.shape[-1], device=logits.device)
        keep_sorted &= rank[None, :] < top_k[:, None]
    if top_p is not None:
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # 排在前面的那些 token 的累计概率
        keep_sorted &= before < top_p[:, None]
    keep = torch.empty_like(keep_sorted)
    keep.scatter_(-1, order, keep_sorted)  # 从排序后的位置放回原来的 token 位置
    return keep


# >> ch16
def seeded_uniform(seed: int, position: int) -> float:
    """``[0, 1)`` 里的一个数，只由 ``(seed, position)`` 决定：同一个请求重放一遍，每个位置
    抽到的随机数都一样，不管它和哪些请求拼在一个批次里、排在第几行。"""
    return random.Random(f"{seed}:{position}").random()


def _seeded_rows(
    params: Sequence[SamplingParams],
    greedy: Sequence[bool],
    positions: Sequence[int] | None,
    device: torch.device | str,
) -> dict[str, torch.Tensor]:
    seeded = [p.seed is not None and not g for p, g in zip(params, greedy)]
    if not any(seeded):
        return {}
    if positions is None:
        raise ValueError("requests with a seed need the positions of their new tokens")
    uniforms = [
        seeded_uniform(p.seed, pos) if p.seed is not None else 0.0
        for p, pos in zip(params, positions)
    ]
    return {
        "seeded": to_device(torch.tensor(seeded, dtype=torch.bool), device),
        "uniforms": to_device(torch.tensor(uniforms, dtype=torch.float32), device),
    }


# << ch16
class Sampler:
    """整批采样。``generator`` 决定随机性；它必须和 logits 在同一个设备上。"""

    def __init__(self, device: torch.device | str, seed: int = 0) -> None:
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def sample(self, logits: torch.Tensor, args: BatchSamplingArgs) -> torch.Tensor:
        """``logits``: ``(bs, vocab)`` → ``(bs,)`` int64 的下一个 token。"""
        if args.all_greedy:
            return logits.argmax(dim=-1)
        assert args.temperatures is not None and args.greedy is not None
        # float32 里做 softmax：bf16 的 logits 直接算概率，尾部的小概率会被舍入成 0
        scaled = logits.float() / args.temperatures[:, None]
        if args.top_k is not None or args.top_p is not None:
            keep = top_k_top_p_mask(scaled, args.top_k, args.top_p)
            scaled = scaled.masked_fill(~keep, float("-inf"))
        probs = scaled.softmax(dim=-1)
        sampled = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
        # >> ch16
        if args.uniforms is not None and args.seeded is not None:
            # 逆变换抽样：累计概率第一次超过 u × 总和的那个 token。乘上总和而不是直接用 u：
            # 浮点累加的总和可能比 1 小一点点，u 又恰好落在那一点点里时会越界
            cdf = probs.cumsum(dim=-1)
            target = (args.uniforms * cdf[:, -1])[:, None]
            chosen = torch.searchsorted(cdf, target, right=True).squeeze(-1)
            # u 在 float32 里可能恰好舍入成 1：越过末尾时退回最后一个概率大于 0 的 token
            last_positive = probs.shape[-1] - 1 - (probs.flip(-1) > 0).int().argmax(dim=-1)
            chosen = torch.minimum(chosen, last_positive)
            sampled = torch.where(args.seeded, chosen, sampled)
        # << ch16
        return torch.where(args.greedy, logits.argmax(dim=-1), sampled)
