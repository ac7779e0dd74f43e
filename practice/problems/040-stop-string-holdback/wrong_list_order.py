"""错误答案：按 stops 的先后找，第一个找到的就算数，而不是最先完整出现的那一个。"""

from __future__ import annotations


class StopMatcher:
    def __init__(self, stops: list[str]) -> None:
        if any(s == "" for s in stops):
            raise ValueError("stop strings must not be empty")
        self.stops = list(stops)
        self.held = ""  # 还没发出的结尾：它可能是某个停止字符串的开头
        self.stopped = False

    def _holdback(self, text: str) -> int:
        """text 的结尾最长有几个字符是某个停止字符串的真前缀。"""
        longest = max((len(s) for s in self.stops), default=1)
        for n in range(min(len(text), longest - 1), 0, -1):
            tail = text[-n:]
            if any(len(s) > n and s.startswith(tail) for s in self.stops):
                return n
        return 0

    def feed(self, text: str) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        pending = self.held + text
        # 已经发出的文本里不可能有停止字符串的开头（否则它会被留住），只需在 pending 里找
        hits = [i for i in (pending.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.stopped = True
            self.held = ""
            return pending[: hits[0]], True  # 错在这里：hits[0] 不一定最靠前
        keep = self._holdback(pending)
        self.held = pending[len(pending) - keep :]
        return pending[: len(pending) - keep], False

    def flush(self) -> str:
        out, self.held = ("" if self.stopped else self.held), ""
        return out
