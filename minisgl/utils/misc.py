"""小而常用的整数运算和杂项工具。

推理引擎里到处是"把 N 个东西均分给 tp 个 rank""把 token 数补齐到整页"这样的整数运算。
分不均时，与其让后面某个张量的形状莫名其妙地对不上，不如在这里立刻报出是哪两个数。
这里用 ``raise`` 而不是 ``assert``：``python -O`` 会删掉所有 assert。
"""

from __future__ import annotations

from typing import Callable, TypeVar

__all__ = ["align_down", "align_up", "call_if_main", "div_ceil", "div_even", "format_bytes"]

F = TypeVar("F", bound=Callable[[], object])


def _check_positive(b: int, what: str) -> None:
    if b <= 0:
        raise ValueError(f"{what} must be positive, got {b}")


def div_even(a: int, b: int, allow_replicate: bool = False) -> int:
    """``a // b``，要求整除。典型用法：每个 TP rank 分到几个注意力头。

    ``allow_replicate=True`` 处理 KV 头比 rank 少的情况（GQA 模型常见：8 个 KV 头、tp=16）：
    这时每个 rank 放 1 个 KV 头，相邻的 ``b // a`` 个 rank 共用同一个头的副本，所以返回 1。
    这要求 ``b`` 是 ``a`` 的整数倍，否则有的头会被复制得比别的头多。
    """
    _check_positive(b, "divisor")
    if allow_replicate and b > a:
        if a <= 0 or b % a != 0:
            raise ValueError(f"cannot replicate {a} over {b}: {b} is not a multiple of {a}")
        return 1
    if a % b != 0:
        raise ValueError(f"{a} is not divisible by {b}")
    return a // b


def div_ceil(a: int, b: int) -> int:
    """向上取整的除法：1000 个 token、每页 16 个，需要 63 页。"""
    _check_positive(b, "divisor")
    return -(-a // b)


def align_up(a: int, b: int) -> int:
    """不小于 ``a`` 的最小的 ``b`` 的倍数。"""
    return div_ceil(a, b) * b


def align_down(a: int, b: int) -> int:
    """不大于 ``a`` 的最大的 ``b`` 的倍数。"""
    _check_positive(b, "alignment")
    return a // b * b


def format_bytes(n: int | float) -> str:
    """把字节数写成人读的形式：``format_bytes(3 * 2**30) == "3.00 GiB"``。"""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"


def call_if_main(fn: F) -> F:
    """装饰器：函数所在的模块作为脚本运行（``__name__ == "__main__"``）时立刻调用它。

    判断依据是函数自己的 ``__module__``——它就是定义这个函数的模块的 ``__name__``，
    不需要调用方再把 ``__name__`` 传进来。被别的模块导入时什么也不做，函数原样返回，
    测试可以导入后直接调用它。
    """
    if fn.__module__ == "__main__":
        fn()
    return fn
