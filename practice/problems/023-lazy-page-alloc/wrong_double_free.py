"""错误答案：释放时不检查——同一页还两次会在空闲页列表里出现两次，之后分给两个请求。"""

from __future__ import annotations


def pages_needed(num_tokens: int, page_size: int) -> int:
    if page_size < 1 or num_tokens < 0:
        raise ValueError(f"需要 page_size >= 1、num_tokens >= 0，得到 {page_size}, {num_tokens}")
    return -(-num_tokens // page_size)  # 向上取整


class PageAllocator:
    def __init__(self, num_pages: int, page_size: int) -> None:
        if num_pages < 0 or page_size < 1:
            raise ValueError(f"需要 num_pages >= 0、page_size >= 1，得到 {num_pages}, {page_size}")
        self.num_pages = num_pages
        self.page_size = page_size
        self._free = list(range(num_pages))
        self._is_free = [True] * num_pages  # 查"是不是已经空闲"不必扫整张列表

    @property
    def available_pages(self) -> int:
        return len(self._free)

    def extend(self, pages: list[int], cached_len: int, device_len: int) -> list[int]:
        if not 0 <= cached_len < device_len:
            raise ValueError(f"需要 0 <= cached_len < device_len，得到 {cached_len}, {device_len}")
        if len(pages) != pages_needed(cached_len, self.page_size):
            raise ValueError(f"{len(pages)} 页和 cached_len={cached_len} 对不上")
        # 最后一页可能还没写满：缺的页数按 device_len 算，而不是按 extend_len 算
        new = pages_needed(device_len, self.page_size) - len(pages)
        if new > len(self._free):
            raise RuntimeError(f"要 {new} 页，只剩 {len(self._free)} 页")
        taken, self._free = self._free[:new], self._free[new:]
        for page in taken:
            self._is_free[page] = False
        pages.extend(taken)
        ps = self.page_size
        return [pages[i // ps] * ps + i % ps for i in range(cached_len, device_len)]

    def free(self, pages: list[int]) -> None:
        # 错在这里：没有检查页是否存在、是否已经空闲
        for page in pages:
            self._is_free[page] = True
        self._free.extend(pages)
