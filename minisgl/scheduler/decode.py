"""decode 管理器：所有 prefill 完、还能继续生成的请求，每一步一起 decode。"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .cache import CacheManager
from .utils import SchedReq

__all__ = ["DecodeManager"]


class DecodeManager:
    """运行中请求的集合（按加入的顺序）。连续批处理的"连续"就在这里：每一步都可能有请求
    加入（刚 prefill 完）或离开（生成结束），批次的成员每一步都在变。"""

    def __init__(self) -> None:
        self._running: dict[int, SchedReq] = {}  # uid -> req；dict 保持插入顺序

    @property
    def running(self) -> list[SchedReq]:
        return list(self._running.values())

    def __len__(self) -> int:
        return len(self._running)

    def update(self, reqs: Iterable[SchedReq]) -> None:
        """一批请求前向之后：还能生成的留下（新来的加入），到了长度上限的离开。"""
        for req in reqs:
            # >> ch09
            if req.is_chunked:  # 提示还没算完（分块预填充）：还不能 decode
                continue
            # << ch09
            if req.can_decode and not req.finished:
                self._running[req.uid] = req
            else:
                self._running.pop(req.uid, None)

    def remove(self, req: SchedReq) -> None:
        self._running.pop(req.uid, None)

    # >> ch17
    def retract_order(self) -> list[SchedReq]:
        """缺页时退回请求的顺序：最晚加入的先退——它算过的最少，重算最便宜；先来的先完成。"""
        return list(reversed(self._running.values()))

    # << ch17
    # >> ch11
    def get(self, uid: int) -> SchedReq | None:
        return self._running.get(uid)

    # << ch11
    def reserved_pages(
        self, cache: CacheManager, reserve_until: Callable[[SchedReq], int] | None = None
    ) -> int:
        """运行中的请求将来还要的页：各自到 ``reserve_until(r)``（默认生成到头）时需要的页数，
        减去已经拿到的。接纳新请求时先扣掉这些，decode 就永远不会因为没页而卡住。"""
        until = reserve_until or (lambda r: r.max_device_len)
        return sum(cache.pages_missing(r, until(r)) for r in self._running.values())
