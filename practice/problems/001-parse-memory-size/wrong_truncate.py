"""错误答案：不是整数个字节时悄悄截断（"0.1K" 得到 102），而不是报错。"""

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
    factor = _UNITS.get(unit.upper())
    if factor is None:
        raise ValueError(f"内存大小 {text!r} 的单位不认识")
    return int(Fraction(number) * factor)  # 错在这里：int() 直接截断了小数部分
