"""练习 007：按 checkpoint 的顺序边读边合并 q/k/v 与 gate/up，凑齐一组就交出去。"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

GROUPS = {
    "q_proj": ("qkv_proj", ("q_proj", "k_proj", "v_proj")),
    "k_proj": ("qkv_proj", ("q_proj", "k_proj", "v_proj")),
    "v_proj": ("qkv_proj", ("q_proj", "k_proj", "v_proj")),
    "gate_proj": ("gate_up_proj", ("gate_proj", "up_proj")),
    "up_proj": ("gate_up_proj", ("gate_proj", "up_proj")),
}


def merge_stream(items: Iterable[tuple[str, list[Any]]]) -> Iterator[tuple[str, list[Any]]]:
    """不属于合并组的项立刻交出；一组凑齐立刻交出合并结果（按组内顺序拼接）。

    重复的成员、结束时没凑齐的组都抛 ValueError，信息里有相关的名字。
    """
    raise NotImplementedError("在这里实现 merge_stream")
    yield  # 让这个函数成为生成器；实现时删掉上一行
