"""错误答案：恢复语句没放进 finally，with 块里一抛异常默认 dtype 就回不去了。"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[torch.dtype]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    yield previous
    torch.set_default_dtype(previous)  # 错在这里：异常时这一行不会执行
