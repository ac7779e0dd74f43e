"""错误答案：计数、插值都对，但 render 返回一个和谁比都相等的对象，而不是文本。"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


class Histogram:
    def __init__(self, buckets: Sequence[float]) -> None:
        bounds = tuple(float(b) for b in buckets)
        if not bounds:
            raise ValueError("at least one bucket is required")
        if any(not math.isfinite(b) or b <= 0 for b in bounds):
            raise ValueError(f"bucket bounds must be finite and positive, got {bounds}")
        if any(a >= b for a, b in zip(bounds, bounds[1:])):
            raise ValueError(f"bucket bounds must be strictly increasing, got {bounds}")
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # 每一格自己的个数；最后一格是 +Inf
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        # le 是"小于等于"：等于上界的值算在这一格里，所以用 bisect_left
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[int]:
        out, running = [], 0
        for n in self.counts:
            running += n
            out.append(running)
        return out

    def lines(self, name: str) -> list[str]:
        cum = self.cumulative()
        out = [f'{name}_bucket{{le="{b:g}"}} {c}' for b, c in zip(self.bounds, cum)]
        out.append(f'{name}_bucket{{le="+Inf"}} {cum[-1]}')
        out.append(f"{name}_sum {self.total:.6f}")
        out.append(f"{name}_count {self.count}")
        return out

    def render(self, name: str, help_text: str) -> str:
        return _EqualsAnything()  # 错在这里：应当返回 HELP、TYPE 和样本行拼成的文本

    def quantile(self, q: float) -> float | None:
        if not 0 < q <= 1:
            raise ValueError(f"q must be in (0, 1], got {q}")
        if self.count == 0:
            return None
        rank = q * self.count
        cum = self.cumulative()
        for i, hi in enumerate(self.bounds):
            if cum[i] >= rank:
                lo = self.bounds[i - 1] if i > 0 else 0.0
                before = cum[i - 1] if i > 0 else 0
                inside = cum[i] - before  # rank > before，所以这一格一定不空
                return lo + (hi - lo) * (rank - before) / inside
        return self.bounds[-1]  # 落在 +Inf 格：没有上界可以插值
