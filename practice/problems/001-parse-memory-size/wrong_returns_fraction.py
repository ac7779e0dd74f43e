"""错误答案：检查都对，但返回的是 Fraction 而不是 int。Fraction(1024) == 1024，只比 == 看不出来。"""

from __future__ import annotations

import re
from fractions import Fraction

# 用 [0-9] 而不是 \d：\d 还会匹配全角数字等 Unicode 数字
_PATTERN = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)")

# 单位（统一成大写后查表）→ 倍数；都是 1024 的幂
_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
}


def parse_memory_size(text: str) -> int:
    """把内存大小字符串（如 "512M"、"1.5g"、"1024"）解析成字节数；不合法时抛 ValueError。"""
    match = _PATTERN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"无法解析内存大小 {text!r}：应形如 1024、512M、1.5G")
    number, unit = match.groups()
    factor = _UNITS.get(unit.upper())
    if factor is None:
        raise ValueError(f"内存大小 {text!r} 的单位 {unit!r} 不认识：可用 B、K、M、G、T（可加 B）")
    # Fraction 从十进制字符串精确构造，不经过浮点数，所以结果没有舍入误差
    value = Fraction(number) * factor
    if value.denominator != 1:
        raise ValueError(f"内存大小 {text!r} 不是整数个字节（{float(value)} 字节）")
    return value  # 错在这里：没有转成 int
