"""错误答案：格式检查都对，但用 float 计算，大数会丢精度（2**53 + 1 变成 2**53）。"""

from __future__ import annotations

import re

_PATTERN = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20}
_UNITS.update({"G": 1 << 30, "GB": 1 << 30, "T": 1 << 40, "TB": 1 << 40})


def parse_memory_size(text: str) -> int:
    match = _PATTERN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"无法解析内存大小 {text!r}")
    number, unit = match.groups()
    factor = _UNITS.get(unit.upper())
    if factor is None:
        raise ValueError(f"内存大小 {text!r} 的单位不认识")
    value = float(number) * factor  # 错在这里：float 只有 53 位有效数字
    if not value.is_integer():
        raise ValueError(f"内存大小 {text!r} 不是整数个字节")
    return int(value)
