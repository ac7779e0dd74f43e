"""错误答案：准入时队头只算提示（加已生成的 token）要的页，不管 headroom（像 vLLM 那样按需分配）。

接纳的请求更多，可是它们写不了几个 token 池子就满了，只能频繁退回、白算；headroom=None 时
也不再是第 8 章的整段预留。
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple


class Request(NamedTuple):
    """一个生成请求。已经写好，不要改。"""

    uid: int
    arrival: int  # 在第几步到达
    prompt_len: int
    max_tokens: int


@dataclass
class _Job:
    """一个通过了 plan 的请求，排队时和运行时都用它。"""

    uid: int
    prompt_len: int
    output: int  # plan 截过的输出长度
    generated: int = 0  # 一共生成了几个 token；被退回也不清零
    length: int = 0  # KV 在池子里的 token 数；排队时是 0

    @property
    def total(self) -> int:
        return self.prompt_len + self.output


def plan(
    prompt_len: int, max_tokens: int, num_pages: int, page_size: int
) -> tuple[int, int] | None:
    """返回 (输出长度, 整段要的页数)；提示本身就放不下整个池子时返回 None（拒绝）。"""
    capacity = num_pages * page_size
    output = min(max_tokens, capacity - prompt_len)
    if output < 1:
        return None
    return output, -(-(prompt_len + output) // page_size)


def _pages(tokens: int, page_size: int) -> int:
    return -(-tokens // page_size)


def _target(total: int, length: int, headroom: int | None, page_size: int) -> int:
    """写到 length 个 token 的请求手里的页加上预留的页。

    就是 ceil(min(total, length + h) / page_size)，h 是往后预留的 token 数。
    """
    end = total if headroom is None else min(total, length + headroom)
    return _pages(end, page_size)


def _check(
    num_pages: int,
    page_size: int,
    max_running: int,
    requests: list[Request],
    headroom: int | None,
) -> None:
    if num_pages < 1 or page_size < 1 or max_running < 1:
        raise ValueError("num_pages, page_size and max_running must be >= 1")
    if headroom is not None and headroom < 0:
        raise ValueError("headroom must be None or >= 0")
    seen: set[int] = set()
    for r in requests:
        if r.arrival < 0 or r.prompt_len < 1 or r.max_tokens < 1:
            raise ValueError(f"bad request {r}")
        if r.uid in seen:
            raise ValueError(f"duplicate uid {r.uid}")
        seen.add(r.uid)


def simulate(
    num_pages: int,
    page_size: int,
    max_running: int,
    requests: list[Request],
    headroom: int | None = None,
) -> list[tuple[int, str, int]]:
    """逐步模拟到达、准入、生成（缺页时退回），返回 [(步, 事件, uid), ...]。

    事件是 "reject"、"admit"、"retract"、"finish" 之一。
    """
    _check(num_pages, page_size, max_running, requests, headroom)
    arrivals: dict[int, list[Request]] = {}
    for r in requests:
        arrivals.setdefault(r.arrival, []).append(r)
    last_arrival = max(arrivals, default=-1)
    queue: deque[_Job] = deque()
    running: list[_Job] = []  # 按接纳的先后
    events: list[tuple[int, str, int]] = []
    step = 0
    while step <= last_arrival or queue or running:
        # 1. 到达
        for r in arrivals.get(step, []):
            p = plan(r.prompt_len, r.max_tokens, num_pages, page_size)
            if p is None:
                events.append((step, "reject", r.uid))
            else:
                queue.append(_Job(r.uid, r.prompt_len, p[0]))
        # 2. 准入：运行中的请求手里的页 + 它们预留的页 + 队头要的页，放得下才接纳
        committed = sum(_target(j.total, j.length, headroom, page_size) for j in running)
        while queue and len(running) < max_running:
            head = queue[0]
            start = head.prompt_len + head.generated  # 被退回过的请求，已生成的并进提示
            need = _pages(start, page_size)  # 错在这里：只算提示的页
            if committed + need > num_pages:
                break  # 只看队头：放不下就停，不跳过
            queue.popleft()
            head.length = start
            running.append(head)
            committed += need
            events.append((step, "admit", head.uid))
        if queue and not running:
            raise RuntimeError(f"deadlock at step {step}: request {queue[0].uid} never fits")
        # 3. 生成：缺页时从最晚接纳的开始退回，退回的排回队头
        held = sum(_pages(j.length, page_size) for j in running)
        new_pages = sum(1 for j in running if j.length % page_size == 0)
        while new_pages > num_pages - held and len(running) > 1:
            job = running.pop()
            events.append((step, "retract", job.uid))
            held -= _pages(job.length, page_size)
            new_pages -= job.length % page_size == 0
            job.length = 0
            queue.appendleft(job)  # 同一步退回几个时，先接纳的排在最前
        if new_pages > num_pages - held:
            raise RuntimeError(f"step {step}: request {running[0].uid} alone does not fit")
        for job in running:
            job.length += 1
            job.generated += 1
        for job in running:
            if job.generated == job.output:
                events.append((step, "finish", job.uid))
        running = [j for j in running if j.generated < j.output]
        step += 1
    return events
