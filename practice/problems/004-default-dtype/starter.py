"""练习 004：在 with 块内临时切换 torch 的默认浮点 dtype。"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[torch.dtype]:
    """块内 torch 的默认 dtype 为 dtype；退出时（正常或异常）恢复成进入前的值。

    as 得到进入前的默认 dtype；块里的异常照常向外抛；可以嵌套。
    """
    raise NotImplementedError("在这里实现 default_dtype")
    yield torch.get_default_dtype()  # 让这个函数成为生成器；实现时删掉上一行
