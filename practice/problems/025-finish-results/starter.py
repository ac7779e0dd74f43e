"""练习 025：结束规则与结果流——每个请求恰好结束一次，坏请求当场回一个 error。"""

from __future__ import annotations

from typing import Callable

Result = tuple[int, int | None, bool, str | None]  # (uid, token, finished, finish_reason)


def pages_needed(num_tokens: int, page_size: int) -> int:
    """装下 num_tokens 个 token 要几页（向上取整）。"""
    raise NotImplementedError("在这里实现 pages_needed")


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

    @property
    def running(self) -> list[int]:
        """还在运行的请求的 uid，按提交顺序。"""
        raise NotImplementedError("在这里实现 running")

    def submit(
        self, uid: int, prompt_len: int, max_tokens: int, ignore_eos: bool = False
    ) -> list[Result]:
        """坏请求返回 [(uid, None, True, "error")]；好请求进入 running，返回 []。"""
        raise NotImplementedError("在这里实现 submit")

    def process(self, sampled: list[tuple[int, int]]) -> list[Result]:
        """处理这一步采样到的 (uid, token)：记账、判断结束、恰好释放一次，返回结果。"""
        raise NotImplementedError("在这里实现 process")
