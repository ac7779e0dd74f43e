"""练习 023：按需分页——每一步只给这一步要写的 token 补上缺的页。"""

from __future__ import annotations


def pages_needed(num_tokens: int, page_size: int) -> int:
    """装下 num_tokens 个 token 要几页（向上取整）。"""
    raise NotImplementedError("在这里实现 pages_needed")


class PageAllocator:
    """空闲页列表：一开始是 [0, 1, …, num_pages - 1]；从开头取页，还回来的页追加到末尾。"""

    def __init__(self, num_pages: int, page_size: int) -> None:
        self.num_pages = num_pages
        self.page_size = page_size

    @property
    def available_pages(self) -> int:
        """空闲页的个数。"""
        raise NotImplementedError("在这里实现 available_pages")

    def extend(self, pages: list[int], cached_len: int, device_len: int) -> list[int]:
        """给请求补页（原地追加到 pages），返回位置 cached_len .. device_len - 1 的槽位。

        参数不合法时抛 ValueError；空闲页不够时抛 RuntimeError，而且什么都不改。
        """
        raise NotImplementedError("在这里实现 extend")

    def free(self, pages: list[int]) -> None:
        """把页还回空闲页列表末尾；不存在、已空闲或重复的页抛 ValueError，一页也不还。"""
        raise NotImplementedError("在这里实现 free")
