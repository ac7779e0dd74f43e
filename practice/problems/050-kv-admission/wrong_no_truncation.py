"""错误答案：不把输出截到池子容量以内，只拒绝提示本身放不下的请求。

要的页比整个池子还多的请求永远进不去，排在它后面的请求也全被堵死。
"""

from __future__ import annotations

from collections import deque
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
    capacity = num_pages * page_size
    if prompt_len >= capacity:
        return None
    output = max_tokens  # 错在这里：没有截到 capacity - prompt_len
    return output, -(-(prompt_len + output) // page_size)


def _check(num_pages: int, page_size: int, max_running: int, requests: list[Request]) -> None:
    if num_pages < 1 or page_size < 1 or max_running < 1:
        raise ValueError("num_pages, page_size and max_running must be >= 1")
    seen: set[int] = set()
    for r in requests:
        if r.arrival < 0 or r.prompt_len < 1 or r.max_tokens < 1:
            raise ValueError(f"bad request {r}")
        if r.uid in seen:
            raise ValueError(f"duplicate uid {r.uid}")
        seen.add(r.uid)


def simulate(
    num_pages: int, page_size: int, max_running: int, requests: list[Request]
) -> list[tuple[int, str, int]]:
    """逐步模拟到达、准入、生成，返回 [(步, "reject" | "admit" | "finish", uid), ...]。"""
    _check(num_pages, page_size, max_running, requests)
    arrivals: dict[int, list[Request]] = {}
    for r in requests:
        arrivals.setdefault(r.arrival, []).append(r)
    last_arrival = max(arrivals, default=-1)
    queue: deque[tuple[int, int, int]] = deque()  # (uid, output, pages)
    running: list[list[int]] = []  # [uid, output, pages, generated]，按接纳的先后
    events: list[tuple[int, str, int]] = []
    step = 0
    while step <= last_arrival or queue or running:
        for r in arrivals.get(step, []):
            p = plan(r.prompt_len, r.max_tokens, num_pages, page_size)
            if p is None:
                events.append((step, "reject", r.uid))
            else:
                queue.append((r.uid, *p))
        used = sum(req[2] for req in running)
        while queue and len(running) < max_running and used + queue[0][2] <= num_pages:
            uid, output, pages = queue.popleft()  # 只看队头：放不下就停，不跳过
            running.append([uid, output, pages, 0])
            used += pages
            events.append((step, "admit", uid))
        if queue and not running:
            raise RuntimeError(f"deadlock at step {step}: request {queue[0][0]} never fits")
        for req in running:
            req[3] += 1
        for req in running:
            if req[3] == req[1]:
                events.append((step, "finish", req[0]))
        running = [req for req in running if req[3] < req[1]]
        step += 1
    return events
