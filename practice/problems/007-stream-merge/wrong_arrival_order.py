"""错误答案：按成员到达的顺序拼接，checkpoint 里 k 在 q 前面时拼出来的就是 k、q、v。"""

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
    pending: dict[str, tuple[list[str], int, tuple[str, ...], dict[str, list[Any]]]] = {}
    for name, rows in items:
        parts = name.split(".")
        hits = [i for i, part in enumerate(parts) if part in GROUPS]
        if len(hits) != 1:
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
            del pending[merged]
            yield merged, [row for m in slots for row in slots[m]]  # 错在这里：到达顺序
    missing = []
    for parts, i, order, slots in pending.values():
        missing += [".".join(parts[:i] + [m] + parts[i + 1 :]) for m in order if m not in slots]
    if missing:
        raise ValueError(f"缺少：{', '.join(missing)}")
