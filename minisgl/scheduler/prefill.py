"""prefill 管理器：排队的请求，按 token 预算和 KV 预留，决定这一步接纳哪几个。"""

from __future__ import annotations

from collections import deque

from .cache import CacheManager
from .table import ReqTable
from .utils import PendingReq, SchedReq

__all__ = ["PrefillManager"]


class PrefillManager:
    """先来先服务的等待队列。接纳一个请求要同时满足三件事：

    1. 请求表有空行；
    2. 这一批的新 token 没有超出预算 ``max_extend_tokens``；
    3. KV 够：它从提示到生成完最多要的页 ≤ 现在能拿到的页 − 已经预留给别人的页。

    任何一条不满足就停下——队头的请求不被跳过（否则长请求可能永远等下去）。
    """

    def __init__(
        self,
        cache: CacheManager,
        table: ReqTable,
        max_extend_tokens: int,
        # >> ch17
        headroom: int | None = None,
        # << ch17
    ) -> None:
        self.cache = cache
        self.table = table
        self.max_extend_tokens = max_extend_tokens
        # >> ch17
        # 乐观接纳（第 17 章）：每个请求只预留往后 headroom 个 token 的页；None：预留到生成完
        self.headroom = headroom
        # << ch17
        self.pending: deque[PendingReq] = deque()
        # >> ch09
        self.chunked: SchedReq | None = None  # 提示还没算完的那个请求（最多一个）
        # << ch09

    def __len__(self) -> int:
        # >> ch09
        if self.chunked is not None:  # 没算完的那个请求也在等：等下一块
            return len(self.pending) + 1
        # << ch09
        return len(self.pending)

    def add(self, req: PendingReq) -> None:
        self.pending.append(req)

    def schedule(self, reserved_pages: int) -> list[SchedReq]:
        """从队头开始接纳请求，直到有一条不满足。返回的请求已经有了页表行和提示要用的页。"""
        admitted: list[SchedReq] = []
        budget = self.max_extend_tokens
        # >> ch09
        if self.chunked is not None:  # 上一步没算完的请求排在最前面，接着算下一块
            req, self.chunked = self.chunked, None
            # >> ch17
            # 乐观接纳时，它预留的页可能已经被 decode 用掉了：这一块放不下就先等着，这一步去
            # decode（decode 缺页时会退回请求，页总会空出来）。它排在队头，后面的请求也等着
            end = req.cached_len + min(req.host_len - req.cached_len, budget)
            if self.cache.pages_missing(req, end) > self.cache.available_pages:
                self.chunked = req
                return []
            # << ch17
            self._take_chunk(req, budget)
            self.cache.ensure_pages(req, req.device_len)  # 这一块要用的页
            budget -= req.extend_len
            reserved_pages += self.cache.pages_missing(req, self.reserve_until(req))
            admitted.append(req)
        # << ch09
        while self.pending and self.table.num_free > 0:
            pending = self.pending[0]
            # >> ch09
            # 预算还有剩，就能接纳：提示比预算长时只算放得下的那一块。先查预算再匹配前缀：
            # 接纳不了的请求不去碰 radix 树（匹配会切开节点、刷新它们的访问时间）
            if budget <= 0:
                break
            # << ch09
            handle, cached_pages = self.cache.match_req(pending.input_ids)
            # ~~ ch08 < ch09
            # ~ if admitted and len(pending.input_ids) - handle.cached_len > budget:
            # ~     break  # 第一个请求例外：否则比预算长的提示永远进不来
            # ~~
            # 先锁住匹配到的前缀：锁住的页不再算"可淘汰"，下面的可用页数才是真的
            self.cache.prefix_cache.lock(handle)
            total_pages = self.cache.pages_for(len(pending.input_ids) + pending.output_len)
            # >> ch17
            if self.headroom is not None:  # 乐观接纳：只预留往后 headroom 个 token 的页
                ahead = min(pending.output_len, self.headroom)
                total_pages = self.cache.pages_for(len(pending.input_ids) + ahead)
            # << ch17
            need = total_pages - len(cached_pages)
            if need > self.cache.available_pages - reserved_pages:
                self.cache.prefix_cache.unlock(handle)
                break
            self.pending.popleft()
            req = SchedReq(
                input_ids=pending.input_ids,
                table_idx=self.table.allocate(),
                cached_len=handle.cached_len,
                output_len=pending.output_len,
                uid=pending.uid,
                sampling_params=pending.sampling_params,
                pages=list(cached_pages),
                cache_handle=handle,
            )
            # >> ch17
            if pending.generated:  # 退回过的请求：提示还是原来那么长，output_len 也按原来的算
                req.prompt_len -= pending.generated
                req.output_len += pending.generated
            # << ch17
            self.cache.write_row(req)  # 命中的前缀页
            # >> ch09
            self._take_chunk(req, budget)  # 提示比剩下的预算长时，这一步只算放得下的那一块
            # << ch09
            self.cache.ensure_pages(req, req.device_len)  # 这一步要算的 token 用的页
            budget -= req.extend_len
            reserved_pages += total_pages - len(req.pages)  # 它将来还要的页，也预留出来
            admitted.append(req)
        return admitted

    def reserve_until(self, req: SchedReq) -> int:
        """接纳新请求时，要为运行中的 ``req`` 预留到第几个 token：到它生成完为止。"""
        # >> ch17
        if self.headroom is not None:
            # 乐观接纳：只留到眼下之后 headroom 个 token（提示还没算完的，先算上整个提示）
            now = max(req.device_len, req.host_len)
            return min(req.max_device_len, now + self.headroom)
        # << ch17
        return req.max_device_len

    # >> ch17
    def requeue(self, req: PendingReq) -> None:
        """被退回的请求排回队头：它比所有还在排队的请求来得早。"""
        self.pending.appendleft(req)

    # << ch17
    # >> ch11
    def abort(self, uid: int) -> PendingReq | SchedReq | None:
        """从等待队列里拿掉 ``uid``：还没接纳的返回 ``PendingReq``（什么都没占），正在分块的
        返回那个 ``SchedReq``（调用方释放它的行和页）；不在这里返回 None。"""
        if self.chunked is not None and self.chunked.uid == uid:
            req, self.chunked = self.chunked, None
            return req
        for pending in self.pending:
            if pending.uid == uid:
                self.pending.remove(pending)
                return pending
        return None

    # << ch11
    # >> ch09
    def _take_chunk(self, req: SchedReq, budget: int) -> None:
        """这一步算提示的下一块：``cached_len`` 起最多 ``budget`` 个 token，``device_len`` 设到
        块的末尾。没算完的请求记为 ``chunked``，下一步排在最前面。"""
        size = min(req.host_len - req.cached_len, budget)
        req.device_len = req.cached_len + size
        if req.is_chunked:
            self.chunked = req

    # << ch09
