"""错误答案：进门时一次分配全部的页——批次一样，但页被白白占着，空闲页数不对。"""

from __future__ import annotations

from dataclasses import dataclass

Row = tuple[int, int, int]  # (uid, cached_len, device_len)
Step = tuple[str, list[Row], int]  # (kind, rows, free_pages)


def pages_needed(num_tokens: int, page_size: int) -> int:
    if page_size < 1 or num_tokens < 0:
        raise ValueError(f"需要 page_size >= 1、num_tokens >= 0，得到 {page_size}, {num_tokens}")
    return -(-num_tokens // page_size)


@dataclass
class _Req:
    uid: int
    prompt_len: int
    output_len: int
    cached_len: int = 0  # KV 池里已有的 token 数
    pages_held: int = 0
    generated: int = 0


def simulate(
    reqs: list[tuple[int, int, int]],
    num_pages: int,
    page_size: int,
    max_running: int,
    max_extend_tokens: int,
) -> list[Step]:
    if min(num_pages, page_size, max_running, max_extend_tokens) < 1:
        raise ValueError("num_pages、page_size、max_running、max_extend_tokens 都必须 >= 1")
    if len({uid for uid, _, _ in reqs}) != len(reqs):
        raise ValueError("uid 重复")
    for uid, prompt_len, output_len in reqs:
        if prompt_len < 1 or output_len < 1:
            raise ValueError(f"请求 {uid}：prompt_len 和 output_len 都必须 >= 1")
        if pages_needed(prompt_len + output_len, page_size) > num_pages:
            raise ValueError(f"请求 {uid} 整个 KV 池都装不下")

    def owed(r: _Req) -> int:  # 还没分到、但已经许给它的页
        return pages_needed(r.prompt_len + r.output_len, page_size) - r.pages_held

    pending = [_Req(uid, p, o) for uid, p, o in reqs]
    chunked: _Req | None = None  # 被切开的请求：逻辑上在队头，占着行和页
    running: list[_Req] = []  # prefill 已完成、在 decode 的请求
    free_pages = num_pages
    trace: list[Step] = []

    def allocate(r: _Req, device_len: int) -> None:
        nonlocal free_pages
        new = max(0, pages_needed(device_len, page_size) - r.pages_held)
        free_pages -= new
        r.pages_held += new
        r.cached_len = device_len
        if free_pages < 0:  # 有预留就不会发生
            raise RuntimeError("KV 页用完了")

    def finish(r: _Req) -> None:
        nonlocal free_pages
        free_pages += r.pages_held
        r.pages_held = 0

    while pending or chunked or running:
        admitted = running + ([chunked] if chunked else [])
        reserved = sum(owed(r) for r in admitted)
        rows_used = len(admitted)
        budget = max_extend_tokens
        batch: list[tuple[_Req, int, int]] = []
        if chunked is not None:  # 被切开的请求最先接着算，不再做准入检查
            n = min(budget, chunked.prompt_len - chunked.cached_len)
            batch.append((chunked, chunked.cached_len, chunked.cached_len + n))
            budget -= n
        while pending and budget > 0:
            r = pending[0]
            need = pages_needed(r.prompt_len + r.output_len, page_size)
            if rows_used == max_running or need > free_pages - reserved:
                break  # 队头阻塞
            pending.pop(0)
            rows_used += 1
            free_pages -= need  # 错在这里：应当按需分配，进门时只预留
            r.pages_held = need
            n = min(budget, r.prompt_len)
            batch.append((r, 0, n))
            budget -= n

        if batch:
            chunked = None
            for r, _, end in batch:
                allocate(r, end)
                if end < r.prompt_len:
                    chunked = r  # 只有最后一个请求可能没算完
                    continue
                r.generated = 1  # 最后一块：采样出第一个 token
                if r.generated == r.output_len:
                    finish(r)
                else:
                    running.append(r)
            rows = [(r.uid, start, end) for r, start, end in batch]
            trace.append(("prefill", rows, free_pages))
        elif running:
            rows = []
            for r in running:
                start = r.cached_len
                allocate(r, start + 1)
                r.generated += 1
                rows.append((r.uid, start, start + 1))
            for r in [r for r in running if r.generated == r.output_len]:
                finish(r)
            running = [r for r in running if r.generated < r.output_len]
            trace.append(("decode", rows, free_pages))
        else:  # 没有运行的请求时，队头一定放得进来（它装得下整个池子）
            raise RuntimeError("调度卡住了")
    return trace
