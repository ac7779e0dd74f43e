"""错误答案：用 except 吞掉了 with 块里的异常。"""

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
    except Exception:  # 错在这里：异常被吞掉，调用方以为一切正常
        pass
    finally:
        torch.set_default_dtype(previous)
