"""错误答案：队头放不下时跳过它，接纳后面放得下的请求。

看起来更"充分利用"了 KV，可是源源不断的小请求能让一个大请求永远等下去（饿死）。
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
    output = min(max_tokens, capacity - prompt_len)
    if output < 1:
        return None
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
        for item in list(queue):  # 错在这里：放不下的跳过，接着看后面的
            uid, output, pages = item
            if len(running) < max_running and used + pages <= num_pages:
                queue.remove(item)
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
