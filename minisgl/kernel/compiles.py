"""Triton 在这个进程里新编译了哪些 kernel。

Triton 按参数的"特化"各编译一份 kernel：整数参数是不是 16 的倍数、是不是 1，指针是不是 16 字节
对齐。服务跑到一半，一组没见过的参数（比如一步的 token 数头一回不是 16 的倍数）会让 Triton 当场
再编译一份，那一步就慢几十到几百毫秒。这里在 Triton 的编译钩子上挂一张观察者的名单：调度器
数它、记日志，基准测试的每一次测量记下是哪几个。钩子只装一个，装之前已有的钩子照样调用；名单
空了就换回原来的钩子。没有 Triton、或者版本太老没有这个钩子时什么也不做。
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["COMPILE_WARNING", "watch_triton_compiles"]

# 调度器数到一次现编译时写的警告，后面接 Triton 的说明；基准测试从服务的日志里按它找出是哪几个
COMPILE_WARNING = "Triton 现编译了一个 kernel（这一步因此变慢）："

_watchers: list[Callable[[str], None]] = []
_previous: list[Any] = []  # 挂上钩子之前的那个（可能是 None），名单空了换回它


def _runtime() -> Any | None:
    try:
        from triton import knobs

        runtime = knobs.runtime
        runtime.jit_post_compile_hook  # noqa: B018  版本太老时没有这个属性
    except (ImportError, AttributeError):
        return None
    return runtime


def _hook(*args: Any, **kwargs: Any) -> Any:
    # repr 是 Triton 自己写的说明：kernel 名、warp 数、流水级数，每个参数的类型和特化
    kernel = str(kwargs.get("repr", kwargs.get("key", "?")))[:400]
    for watcher in list(_watchers):
        watcher(kernel)
    previous = _previous[0] if _previous else None
    return previous(*args, **kwargs) if previous else None


def watch_triton_compiles(on_compile: Callable[[str], None]) -> Callable[[], None] | None:
    """此后 Triton 每编译（或从磁盘缓存载入）一个 kernel，就用它的说明调用 ``on_compile``。
    返回取消观察的函数；看不到编译（没有 Triton、版本太老）时返回 None。"""
    runtime = _runtime()
    if runtime is None:
        return None
    if not _watchers:
        _previous[:] = [runtime.jit_post_compile_hook]
        runtime.jit_post_compile_hook = _hook
    _watchers.append(on_compile)

    def stop() -> None:
        if on_compile in _watchers:
            _watchers.remove(on_compile)
            if not _watchers:
                runtime.jit_post_compile_hook = _previous.pop()

    return stop
