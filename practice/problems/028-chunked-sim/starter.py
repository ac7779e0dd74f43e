"""练习 028：分块预填充遇上 KV 预留——模拟一批请求从进门到结束的每一步。"""

from __future__ import annotations


def pages_needed(num_tokens: int, page_size: int) -> int:
    """装下 num_tokens 个 token 要几页（向上取整）。"""
    raise NotImplementedError("在这里实现 pages_needed")


def simulate(
    reqs: list[tuple[int, int, int]],
    num_pages: int,
    page_size: int,
    max_running: int,
    max_extend_tokens: int,
) -> list[tuple[str, list[tuple[int, int, int]], int]]:
    """reqs 每项是 (uid, prompt_len, output_len)。返回每一步 (kind, rows, free_pages)。

    kind 是 "prefill" 或 "decode"；rows 是 (uid, cached_len, device_len)；
    free_pages 是这一步结束时的空闲页数。规则见题面。
    """
    raise NotImplementedError("在这里实现 simulate")
