"""错误答案：XPUB 只等到第一个订阅者就开始发——其余还没订阅的 rank 照样丢掉前几条。"""

from __future__ import annotations


class _XPub:
    """XPUB 的订阅记录：每来一个事件，返回它产生的通知。"""

    def __init__(self, verbose: bool, verboser: bool) -> None:
        self.verbose = verbose or verboser  # XPUB_VERBOSER 同时打开订阅和退订两种通知
        self.verboser = verboser
        self.holders: dict[bytes, set[str]] = {}  # 主题 → 订阅了它的人
        self.topics_of: dict[str, list[bytes]] = {}  # 订阅者 → 按订阅顺序的主题

    def handle(self, event: tuple) -> list[bytes]:
        kind, who = event[0], event[1]
        if kind == "sub":
            return self._subscribe(who, event[2])
        if kind == "unsub":
            return self._unsubscribe(who, event[2])
        if kind == "close":  # 断开：按订阅的先后顺序逐个退订
            notes: list[bytes] = []
            for topic in list(self.topics_of.get(who, [])):
                notes += self._unsubscribe(who, topic)
            return notes
        raise ValueError(f"未知的事件 {event!r}")

    def _subscribe(self, who: str, topic: bytes) -> list[bytes]:
        group = self.holders.setdefault(topic, set())
        first = not group
        if who not in group:
            group.add(who)
            self.topics_of.setdefault(who, []).append(topic)
        return [b"\x01" + topic] if first or self.verbose else []

    def _unsubscribe(self, who: str, topic: bytes) -> list[bytes]:
        group = self.holders.get(topic)
        if group is None or who not in group:
            return []
        group.discard(who)
        self.topics_of[who].remove(topic)
        if not group:
            del self.holders[topic]
        return [b"\x00" + topic] if not group or self.verboser else []


def xpub_notifications(
    events: list[tuple], verbose: bool = False, verboser: bool = False
) -> list[bytes]:
    xpub = _XPub(verbose, verboser)
    notes: list[bytes] = []
    for event in events:
        notes += xpub.handle(event)
    return notes


def ready_time(events: list[tuple], n: int, verbose: bool = False, verboser: bool = False) -> float:
    xpub = _XPub(verbose, verboser)
    count = 0
    for i, (t, *event) in enumerate(events):
        for note in xpub.handle(tuple(event)):
            count += 1 if note[:1] == b"\x01" else -1
        last_of_instant = i + 1 == len(events) or events[i + 1][0] != t
        if last_of_instant and count >= n:  # 同一时刻的通知全部读完再检查
            return t
    raise TimeoutError(f"只等到 {count} 个订阅者，需要 {n} 个")


def deliveries(
    subscribers: list[tuple[str, str, float]],
    messages: list[tuple[float, str]],
    wait_for: int = 0,
) -> dict[str, list[str]]:
    start = float("-inf")
    if wait_for > 0:
        if len(subscribers) < wait_for:
            raise TimeoutError(f"只有 {len(subscribers)} 个订阅者，等不到 {wait_for} 个")
        start = sorted(active for _, _, active in subscribers)[0]
    got: dict[str, list[str]] = {name: [] for name, _, _ in subscribers}
    for t, text in messages:
        sent_at = max(t, start)  # 到齐之前想发的，推迟到到齐的那一刻
        for name, prefix, active in subscribers:
            if active <= sent_at and text.startswith(prefix):
                got[name].append(text)
    return got
