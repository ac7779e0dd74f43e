"""错误答案：先把所有项读进一个字典再合并——结果对，但整个模型都在内存里，也不是"拿到就交出"。"""

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
    everything: dict[str, list[Any]] = {}
    for name, rows in items:  # 错在这里：读完所有项才开始交出
        if name in everything:
            raise ValueError(f"重复的张量：{name}")
        everything[name] = rows
    done: set[str] = set()
    missing: list[str] = []
    for name in everything:
        parts = name.split(".")
        hits = [i for i, part in enumerate(parts) if part in GROUPS]
        if len(hits) != 1:
            yield name, everything[name]
            continue
        i = hits[0]
        merged_part, order = GROUPS[parts[i]]
        merged = ".".join(parts[:i] + [merged_part] + parts[i + 1 :])
        if merged in done:
            continue
        names = [".".join(parts[:i] + [m] + parts[i + 1 :]) for m in order]
        absent = [n for n in names if n not in everything]
        if absent:
            missing += absent
            done.add(merged)
            continue
        done.add(merged)
        yield merged, [row for n in names for row in everything[n]]
    if missing:
        raise ValueError(f"缺少：{', '.join(missing)}")
