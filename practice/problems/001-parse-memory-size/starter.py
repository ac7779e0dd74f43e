"""练习 001：解析内存大小字符串。"""

from __future__ import annotations


def parse_memory_size(text: str) -> int:
    """把内存大小字符串解析成字节数。

    - 忽略首尾空白；数字与单位之间可以有空白；
    - 数字：0-9 组成，可带一段小数（"1.5"），不接受符号、科学计数法、下划线；
    - 单位不区分大小写：省略或 B = 1，K/KB = 2**10，M/MB = 2**20，G/GB = 2**30，T/TB = 2**40；
    - 结果必须是整数个字节；
    - 不合法时抛 ValueError，信息里包含原始输入 text。

    >>> parse_memory_size("512M")
    536870912
    """
    raise NotImplementedError("在这里实现 parse_memory_size")
