"""错误答案：中止分块中的请求时释放了行和页，却没有清掉 self.chunked。

下一步继续 prefill 它，往已经释放的行里写。
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


class Pool:
    """页表的行与 KV 池的页（已经写好）。

    重复释放、释放没分配的、往没分配的行/页里写，都抛 RuntimeError。
    """

    def __init__(self, num_rows: int, num_pages: int) -> None:
        self.free_rows = list(range(num_rows))
        self.free_page_list = list(range(num_pages))

    def num_free_rows(self) -> int:
        return len(self.free_rows)

    def num_free_pages(self) -> int:
        return len(self.free_page_list)

    def alloc_row(self) -> int:
        if not self.free_rows:
            raise RuntimeError("没有空闲的行")
        return self.free_rows.pop(0)

    def alloc_pages(self, n: int) -> list[int]:
        if n > len(self.free_page_list):
            raise RuntimeError(f"要 {n} 页，只剩 {len(self.free_page_list)} 页")
        pages, self.free_page_list = self.free_page_list[:n], self.free_page_list[n:]
        return pages

    def free_row(self, row: int) -> None:
        if not isinstance(row, int) or row in self.free_rows:
            raise RuntimeError(f"重复释放第 {row} 行")
        self.free_rows.append(row)

    def free_pages(self, pages: list[int]) -> None:
        twice = [p for p in pages if p in self.free_page_list]
        if twice or len(set(pages)) != len(pages):
            raise RuntimeError(f"重复释放页 {twice or pages}")
        self.free_page_list.extend(pages)

    def write(self, row: int, pages: list[int]) -> None:
        if not isinstance(row, int) or row in self.free_rows:
            raise RuntimeError(f"往已经释放的第 {row} 行里写")
        if any(p in self.free_page_list for p in pages):
            raise RuntimeError(f"往已经释放的页里写：{pages}")


@dataclass(eq=False)
class Req:
    uid: int
    prompt_len: int
    max_tokens: int
    row: int | None = None  # 页表的行；进入运行时分配
    pages: list[int] = field(default_factory=list)  # 进入运行时一次分配够
    prefilled: int = 0  # 已经 prefill 了几个提示 token
    outputs: list[int] = field(default_factory=list)  # 主机收到的 token 下标
    finished: bool = False
    finish_reason: str = ""  # "length" 或 "abort"


class Scheduler:
    def __init__(self, pool, page_size: int, chunk_size: int) -> None:
        self.pool = pool
        self.page_size = page_size
        self.chunk_size = chunk_size
        self.reqs: dict[int, Req] = {}
        self.waiting: deque[Req] = deque()  # 排队中：没有行，也没有页
        self.chunked: Req | None = None  # 分块 prefill 到一半的请求
        self.running: list[Req] = []  # 提示已经全部 prefill 的请求，每一步 decode
        self.in_flight: list[tuple[Req, bool]] = []  # 上一步发射、还没处理的批次

    # ---------------------------------------------------------------- 已经写好的部分

    def add(self, uid: int, prompt_len: int, max_tokens: int) -> None:
        if uid in self.reqs or prompt_len < 1 or max_tokens < 1:
            raise ValueError(f"请求 {uid}：prompt_len={prompt_len}, max_tokens={max_tokens}")
        req = Req(uid, prompt_len, max_tokens)
        self.reqs[uid] = req
        self.waiting.append(req)

    def idle(self) -> bool:
        return not self.waiting and self.chunked is None and not self.running and not self.in_flight

    def step(self) -> list[tuple[int, int, bool]]:
        """一轮：调度并发射这一步，再处理上一步的结果（重叠调度）。"""
        batch = self._schedule()
        self._launch(batch)
        results = self._process(self.in_flight)
        self.in_flight = batch
        return results

    def _pages_needed(self, req: Req) -> int:
        return -(-(req.prompt_len + req.max_tokens) // self.page_size)

    def _schedule(self) -> list[tuple[Req, bool]]:
        req = self.chunked
        if req is None and self.waiting:
            head = self.waiting[0]
            need = self._pages_needed(head)
            if self.pool.num_free_rows() > 0 and self.pool.num_free_pages() >= need:
                self.waiting.popleft()
                head.row = self.pool.alloc_row()
                head.pages = self.pool.alloc_pages(need)
                req = head
        if req is not None:  # prefill 优先，一步只 prefill 一个请求的一块
            req.prefilled += min(self.chunk_size, req.prompt_len - req.prefilled)
            if req.prefilled < req.prompt_len:
                self.chunked = req
                return [(req, False)]  # 不是最后一块：不采样
            self.chunked = None
            self.running.append(req)  # 发射时就进入运行：下一步 decode 的输入在设备上
            return [(req, True)]
        return [(r, True) for r in self.running]

    def _launch(self, batch: list[tuple[Req, bool]]) -> None:
        for req, _ in batch:
            self.pool.write(req.row, req.pages)  # 前向往这一行、这些页里写 K/V

    # ---------------------------------------------------------------- 要实现的部分

    def _process(self, batch: list[tuple[Req, bool]]) -> list[tuple[int, int, bool]]:
        results = []
        for req, sampled in batch:
            if not sampled or req.finished:  # 分块的结果不要；已经结束/中止的请求的迟到结果不要
                continue
            k = len(req.outputs)
            req.outputs.append(k)
            done = len(req.outputs) == req.max_tokens
            if done:
                req.finished = True
                req.finish_reason = "length"
                self._free(req)
            results.append((req.uid, k, done))
        return results

    def _free(self, req: Req) -> None:
        if req in self.running:
            self.running.remove(req)
        self.pool.free_row(req.row)
        self.pool.free_pages(req.pages)
        req.row = None
        req.pages = []

    def abort(self, uid: int) -> bool:
        req = self.reqs.get(uid)
        if req is None or req.finished:
            return False
        req.finished = True  # 先立旗：还在路上的结果回来时看到它就丢掉
        req.finish_reason = "abort"
        if req.row is None:  # 还在排队，什么都没分配
            self.waiting.remove(req)
            return True
        # 错在这里：没有清掉 self.chunked
        self._free(req)
        return True
