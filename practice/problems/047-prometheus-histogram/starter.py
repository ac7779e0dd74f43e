"""练习 047：Prometheus 直方图——累计的桶、le 与分位数估计。"""

from __future__ import annotations

from collections.abc import Sequence


class Histogram:
    def __init__(self, buckets: Sequence[float]) -> None:
        """buckets：严格递增的有限正数（不含 +Inf）。"""
        raise NotImplementedError("在这里实现 __init__")

    def observe(self, value: float) -> None:
        """记一个观测值：第一个满足 value <= 上界 的格，比所有上界都大的只进 +Inf。"""
        raise NotImplementedError("在这里实现 observe")

    def lines(self, name: str) -> list[str]:
        """_bucket（累计）、_sum、_count 三组样本，每行一个字符串。"""
        raise NotImplementedError("在这里实现 lines")

    def render(self, name: str, help_text: str) -> str:
        """# HELP、# TYPE 两行加上 lines(name)，每行以换行结尾。"""
        raise NotImplementedError("在这里实现 render")

    def quantile(self, q: float) -> float | None:
        """histogram_quantile：0 < q <= 1；没有观测值时返回 None。"""
        raise NotImplementedError("在这里实现 quantile")
