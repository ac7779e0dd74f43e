"""错误答案：用子串判断成员（"v_proj" in name）。

已经合并过的 qkv_proj、gate_up_proj 被当成了 v、up 成员。
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

ORDERS = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
}


def merge_stream(items: Iterable[tuple[str, list[Any]]]) -> Iterator[tuple[str, list[Any]]]:
    pending: dict[str, dict[str, list[Any]]] = {}
    for name, rows in items:
        found = None
        for merged_part, order in ORDERS.items():
            for member in order:
                if member in name:  # 错在这里：子串匹配
                    found = (merged_part, member, order)
        if found is None:
            yield name, rows
            continue
        merged_part, member, order = found
        merged = name.replace(member, merged_part, 1)
        slots = pending.setdefault(merged, {})
        if member in slots:
            raise ValueError(f"重复的张量：{name}")
        slots[member] = rows
        if len(slots) == len(order):
            del pending[merged]
            yield merged, [row for m in order for row in slots[m]]
    missing = []
    for merged, slots in pending.items():
        for merged_part, order in ORDERS.items():
            if merged_part in merged:
                missing += [merged.replace(merged_part, m, 1) for m in order if m not in slots]
    if missing:
        raise ValueError(f"缺少：{', '.join(missing)}")
