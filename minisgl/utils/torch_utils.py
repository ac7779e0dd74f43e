"""和 torch 打交道的几个小工具：临时切换默认 dtype、NVTX 标注、dtype 名字解析。"""

from __future__ import annotations

import contextlib
import functools
from types import TracebackType
from typing import Any, Callable, Iterator, TypeVar

import torch

__all__ = ["dtype_from_str", "nvtx_annotate", "torch_dtype"]

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def torch_dtype(dtype: torch.dtype) -> Iterator[None]:
    """``with`` 块里新建的浮点张量默认是 ``dtype``；退出时恢复原来的默认值，出错也恢复。

    默认 dtype 是进程级的全局状态。建模型时临时改成 bfloat16，如果中途抛了异常而没有
    恢复，之后进程里所有 ``torch.zeros(...)`` 都会悄悄变成 bf16——这种 bug 极难追查，
    所以一定要用 ``try/finally``。
    """
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


def dtype_from_str(name: str) -> torch.dtype:
    """``"bfloat16"``、``"bf16"``、``"torch.float32"`` -> 对应的 ``torch.dtype``。"""
    key = name.strip().lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise ValueError(f"unknown dtype {name!r}; supported: {', '.join(sorted(_DTYPES))}")
    return _DTYPES[key]


class nvtx_annotate:
    """NVTX 标注：在 Nsight Systems 的时间线上给一段代码起个名字。没有 CUDA 时什么都不做。

    和 ``torch.no_grad`` 一样，既能当装饰器，也能当上下文管理器::

        @nvtx_annotate("MLP")
        def forward(self, x): ...

        with nvtx_annotate("sample"):
            ...

    ``name`` 里可以留一个 ``{}``，由 ``layer_id_field`` 指定从被装饰方法的 ``self`` 上取哪个属性
    填进去：``@nvtx_annotate("Layer_{}", layer_id_field="layer_id")`` 在时间线上显示为
    Layer_0、Layer_1……

    为什么要判断 CUDA：CPU 版的 torch 里 NVTX 函数一调用就报错；而在 CPU 上也没有
    Nsight 可看，标注本来就没有意义。
    """

    def __init__(self, name: str, layer_id_field: str | None = None) -> None:
        self.name = name
        self.layer_id_field = layer_id_field
        self._pushed: list[bool] = []  # 每层 with 是否真的 push 了，__exit__ 才知道要不要 pop

    def __enter__(self) -> None:
        enabled = torch.cuda.is_available()
        if enabled:
            torch.cuda.nvtx.range_push(self.name)
        self._pushed.append(enabled)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pushed.pop():
            torch.cuda.nvtx.range_pop()

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not torch.cuda.is_available():
                return fn(*args, **kwargs)
            name = self.name
            if self.layer_id_field is not None and args:
                name = name.format(getattr(args[0], self.layer_id_field, "?"))
            with torch.cuda.nvtx.range(name):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
