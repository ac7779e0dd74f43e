"""错误答案：单位只认大写（"512m"、"1gb" 会被当成未知单位）。"""

from __future__ import annotations

import re
from fractions import Fraction

_PATTERN = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20}
_UNITS.update({"G": 1 << 30, "GB": 1 << 30, "T": 1 << 40, "TB": 1 << 40})


def parse_memory_size(text: str) -> int:
    match = _PATTERN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"无法解析内存大小 {text!r}")
    number, unit = match.groups()
    if unit not in _UNITS:  # 错在这里：忘了 unit.upper()
        raise ValueError(f"内存大小 {text!r} 的单位不认识")
    value = Fraction(number) * _UNITS[unit]
    if value.denominator != 1:
        raise ValueError(f"内存大小 {text!r} 不是整数个字节")
    return int(value)
