"""练习 012：带前缀的因果掩码、一个批次的块对角可见性、每个请求最后一个 token 的下标。"""

from __future__ import annotations


def extend_mask(cached_len: int, extend_len: int) -> list[list[bool]]:
    """extend_len 行、cached_len + extend_len 列的布尔矩阵。

    第 j 行第 t 列为 True 当且仅当 t <= cached_len + j；参数不合法时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 extend_mask")


def batch_mask(reqs: list[tuple[int, int]]) -> list[list[bool]]:
    """reqs 每项是 (cached_len, extend_len)；块对角，对角块是各请求的 extend_mask。"""
    raise NotImplementedError("在这里实现 batch_mask")


def last_indices(reqs: list[tuple[int, int]]) -> list[int]:
    """每个请求最后一个新 token 在一维查询里的下标。"""
    raise NotImplementedError("在这里实现 last_indices")
