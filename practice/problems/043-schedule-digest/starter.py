"""练习 043：调度摘要——滚动的 SHA-256，二分找出两个 rank 第一次分歧的那一步。"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def encode_step(phase: str, uids: Sequence[int], extend_lens: Sequence[int]) -> bytes:
    """一步的编码：b"阶段|uid,...|新token数,...;"。"""
    raise NotImplementedError("在这里实现 encode_step")


def prefix_digests(steps: Iterable[tuple[str, Sequence[int], Sequence[int]]]) -> list[str]:
    """每一步之后的滚动摘要（十六进制）。"""
    raise NotImplementedError("在这里实现 prefix_digests")


def first_divergence(a: Sequence[str], b: Sequence[str]) -> int | None:
    """第一个不同的下标；一个是另一个的前缀时返回较短的长度；相同返回 None。只能二分。"""
    raise NotImplementedError("在这里实现 first_divergence")
