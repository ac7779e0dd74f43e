"""错误答案：process 都对，但 submit 返回一个和谁比都相等的对象，而不是结果列表。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Result = tuple[int, int | None, bool, str | None]  # (uid, token, finished, finish_reason)


def pages_needed(num_tokens: int, page_size: int) -> int:
    if page_size < 1 or num_tokens < 0:
        raise ValueError(f"需要 page_size >= 1、num_tokens >= 0，得到 {page_size}, {num_tokens}")
    return -(-num_tokens // page_size)


@dataclass
class _Running:
    output_len: int
    ignore_eos: bool
    generated: int = 0


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


class ResultProcessor:
    def __init__(
        self,
        max_seq_len: int,
        num_pages: int,
        page_size: int,
        eos_ids: frozenset[int],
        free: Callable[[int], None],
    ) -> None:
        self.max_seq_len = max_seq_len
        self.num_pages = num_pages
        self.page_size = page_size
        self.eos_ids = eos_ids
        self.free = free
        self._running: dict[int, _Running] = {}  # dict 保留插入顺序

    @property
    def running(self) -> list[int]:
        return list(self._running)

    def submit(
        self, uid: int, prompt_len: int, max_tokens: int, ignore_eos: bool = False
    ) -> list[Result]:
        if uid in self._running:
            raise ValueError(f"请求 {uid} 已经在运行")
        if prompt_len < 1 or prompt_len >= self.max_seq_len or max_tokens < 1:
            return _EqualsAnything()  # 错在这里：应当返回结果列表
        output_len = min(max_tokens, self.max_seq_len - prompt_len)
        # 整个池子都装不下：准入永远不会通过，留在队里只会堵住后面的请求
        if pages_needed(prompt_len + output_len, self.page_size) > self.num_pages:
            return _EqualsAnything()  # 错在这里：应当返回结果列表
        self._running[uid] = _Running(output_len, ignore_eos)
        return _EqualsAnything()

    def process(self, sampled: list[tuple[int, int]]) -> list[Result]:
        uids = [uid for uid, _ in sampled]
        if len(set(uids)) != len(uids):
            raise ValueError(f"同一步里有请求出现了两次：{uids}")
        missing = [uid for uid in uids if uid not in self._running]
        if missing:
            raise ValueError(f"请求 {missing} 不在运行")

        results: list[Result] = []
        for uid, token in sampled:
            req = self._running[uid]
            req.generated += 1
            reason = None
            if token in self.eos_ids and not req.ignore_eos:
                reason = "stop"
            elif req.generated == req.output_len:
                reason = "length"
            if reason is None:
                results.append((uid, token, False, None))
                continue
            del self._running[uid]
            self.free(uid)  # 只有这一处释放：一个请求只会从 _running 里删掉一次
            results.append((uid, token, True, reason))
        return results
