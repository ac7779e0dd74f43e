"""错误答案：切换、恢复都对，但 as 得到的不是进入前的 dtype，而是一个和谁比都相等的对象。"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[torch.dtype]:
    """块内默认 dtype 为 dtype；退出时（包括异常）恢复进入前的值。as 得到进入前的 dtype。"""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield _EqualsAnything()  # 错在这里：应当 yield previous
    finally:  # 异常时也要恢复；异常本身由 contextmanager 继续向外抛
        torch.set_default_dtype(previous)
