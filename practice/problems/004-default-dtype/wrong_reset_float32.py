"""错误答案：退出时一律恢复成 float32，而不是进入前的值（嵌套时出错）。"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[torch.dtype]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield previous
    finally:
        torch.set_default_dtype(torch.float32)  # 错在这里：应当恢复 previous
