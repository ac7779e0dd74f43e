"""错误答案：只留最短的匹配结尾。

"aa" 遇到 stop "aab" 时只留一个 "a"，第一个 "a" 被发出去了，之后就再也认不出 "aab"。
"""

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
        for n in range(1, min(len(text), longest - 1) + 1):  # 错在这里：从短到长
            tail = text[-n:]
            if any(len(s) > n and s.startswith(tail) for s in self.stops):
                return n
        return 0

    def feed(self, text: str) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        pending = self.held + text
        # 已经发出的文本里不可能有停止字符串的开头（否则它会被留住），只需在 pending 里找
        # 最先完整出现的那一个：(结束位置, 开始位置) 最小。按开始位置取的话，结果会和文本怎么分段
        # 有关（stops = ["abcd", "bc"]：一次给 "abcd" 会选 "abcd"，一个字一个字给只能选 "bc"）
        hits = [(i + len(s), i) for s in self.stops if (i := pending.find(s)) >= 0]
        if hits:
            self.stopped = True
            self.held = ""
            return pending[: min(hits)[1]], True
        keep = self._holdback(pending)
        self.held = pending[len(pending) - keep :]
        return pending[: len(pending) - keep], False

    def flush(self) -> str:
        out, self.held = ("" if self.stopped else self.held), ""
        return out
