"""参考答案：在 with 块内临时切换 torch 的默认浮点 dtype。"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[torch.dtype]:
    """块内默认 dtype 为 dtype；退出时（包括异常）恢复进入前的值。as 得到进入前的 dtype。"""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield previous
    finally:  # 异常时也要恢复；异常本身由 contextmanager 继续向外抛
        torch.set_default_dtype(previous)
