"""练习 050：乐观接纳与退回——KV 不够时新请求在队头等，decode 缺页时最晚接纳的请求让路。"""

from __future__ import annotations

from typing import NamedTuple


class Request(NamedTuple):
    """一个生成请求。已经写好，不要改。"""

    uid: int
    arrival: int  # 在第几步到达
    prompt_len: int
    max_tokens: int


def plan(
    prompt_len: int, max_tokens: int, num_pages: int, page_size: int
) -> tuple[int, int] | None:
    """返回 (输出长度, 整段要的页数)；提示本身就放不下整个池子时返回 None（拒绝）。"""
    raise NotImplementedError("在这里实现 plan")


def simulate(
    num_pages: int,
    page_size: int,
    max_running: int,
    requests: list[Request],
    headroom: int | None = None,
) -> list[tuple[int, str, int]]:
    """逐步模拟到达、准入、生成（缺页时退回），返回 [(步, 事件, uid), ...]。

    事件是 "reject"、"admit"、"retract"、"finish" 之一。headroom=None 时预留到生成完（第 8 章）。
    """
    raise NotImplementedError("在这里实现 simulate")
