"""参考答案：按 checkpoint 的顺序边读边合并，凑齐一组就交出去。"""

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
    # 合并后的名字 -> (按 . 拆开的各段, 成员在第几段, 组内顺序, {成员: 行})
    pending: dict[str, tuple[list[str], int, tuple[str, ...], dict[str, list[Any]]]] = {}
    for name, rows in items:
        parts = name.split(".")
        hits = [i for i, part in enumerate(parts) if part in GROUPS]
        if len(hits) != 1:  # 不属于任何组：立刻交出
            yield name, rows
            continue
        i = hits[0]
        member = parts[i]
        merged_part, order = GROUPS[member]
        merged = ".".join(parts[:i] + [merged_part] + parts[i + 1 :])
        slots = pending.setdefault(merged, (parts, i, order, {}))[3]
        if member in slots:
            raise ValueError(f"重复的张量：{name}")
        slots[member] = rows
        if len(slots) == len(order):
            del pending[merged]  # 缓冲区里只留没凑齐的组
            yield merged, [row for m in order for row in slots[m]]
    missing = []
    for parts, i, order, slots in pending.values():
        missing += [".".join(parts[:i] + [m] + parts[i + 1 :]) for m in order if m not in slots]
    if missing:
        raise ValueError(f"读完了还有没凑齐的组，缺少：{', '.join(missing)}")
