"""错误答案：分页都对，但 extend 返回一个和谁比都相等的对象，而不是槽位列表。"""

from __future__ import annotations


def pages_needed(num_tokens: int, page_size: int) -> int:
    if page_size < 1 or num_tokens < 0:
        raise ValueError(f"需要 page_size >= 1、num_tokens >= 0，得到 {page_size}, {num_tokens}")
    return -(-num_tokens // page_size)  # 向上取整


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


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
        return _EqualsAnything()  # 错在这里：应当返回槽位列表

    def free(self, pages: list[int]) -> None:
        seen: set[int] = set()
        for page in pages:  # 先全部检查，再修改：出错时一页也不还
            if not 0 <= page < self.num_pages:
                raise ValueError(f"没有第 {page} 页")
            if self._is_free[page] or page in seen:
                raise ValueError(f"第 {page} 页被释放了两次")
            seen.add(page)
        for page in pages:
            self._is_free[page] = True
        self._free.extend(pages)
