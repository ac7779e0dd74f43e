"""停止串：生成的文本里一出现某个字符串（比如 ``"\\n\\n"``、``"Observation:"``）就停下。

难处在于文本是一段一段到的：停止串可能跨两段，前一段以 ``"Obser"`` 结尾、后一段以
``"vation:"`` 开头。前一段如果原样发给客户端，停止串的前一半就已经漏出去了，收不回来。

所以每段文本先进缓冲区，再分三种情况：

1. 缓冲区里出现了完整的停止串：停止串之前的文本发出，停止串本身和它之后的全部丢掉；
2. 缓冲区的结尾可能是某个停止串的开头（``"Obser"`` 是 ``"Observation:"`` 的前缀）：这段结尾
   先扣住（holdback），它前面的文本照常发出；
3. 否则全部发出。

请求因为别的原因结束时（停止符、max_tokens），扣住的文本原样发出（``flush``）。

几个停止串都出现时，取**最先完整出现**的那个（结束位置最靠前；一样靠前时取开始得更早的）。
这样判定和文本怎么分段无关：一次性给全部文本，和一个字一个字地给，结果相同。
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["StopChecker"]


class StopChecker:
    """一个请求的停止串状态。``feed`` 进增量文本，拿回可以安全发出的文本。"""

    def __init__(self, stops: Sequence[str] = ()) -> None:
        if any(not s for s in stops):
            raise ValueError("stop strings must not be empty")
        self.stops = list(dict.fromkeys(stops))  # 去重，保持顺序
        self.buffer = ""  # 扣住、还没发出的文本
        self.matched: str | None = None  # 命中的停止串

    def feed(self, text: str) -> str:
        """收下一段新文本，返回现在可以发出的部分。命中之后 ``matched`` 不为 None，再 feed 无效。"""
        if self.matched is not None:
            return ""
        if not self.stops:  # 没有停止串（绝大多数请求）：不用扣住任何文本
            return text
        self.buffer += text
        hit = self._first_match()
        if hit is not None:
            start, stop = hit
            self.matched = stop
            ready, self.buffer = self.buffer[:start], ""
            return ready
        keep = self._partial_tail()
        cut = len(self.buffer) - keep
        ready, self.buffer = self.buffer[:cut], self.buffer[cut:]
        return ready

    def flush(self) -> str:
        """请求因为别的原因结束：扣住的文本不会再变成停止串了，全部发出。"""
        rest, self.buffer = self.buffer, ""
        return rest

    def _first_match(self) -> tuple[int, str] | None:
        """最先完整出现的停止串：``(开始位置, 停止串)``。"""
        best: tuple[int, int, str] | None = None  # (结束位置, 开始位置, 停止串)
        for stop in self.stops:
            start = self.buffer.find(stop)
            if start < 0:
                continue
            candidate = (start + len(stop), start, stop)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
        return None if best is None else (best[1], best[2])

    def _partial_tail(self) -> int:
        """缓冲区结尾最长的、是某个停止串（真）前缀的那一段有多长。"""
        longest = max((len(s) for s in self.stops), default=1)
        for size in range(min(len(self.buffer), longest - 1), 0, -1):
            tail = self.buffer[-size:]
            if any(s.startswith(tail) for s in self.stops):
                return size
        return 0
