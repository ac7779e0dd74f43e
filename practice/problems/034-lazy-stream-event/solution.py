"""参考答案：懒执行的 stream 与 event。"""

from __future__ import annotations

from typing import Callable


class Stream:
    def __init__(self, name: str = "") -> None:
        self.name = name
        # 队列里两种项：("work", fn) 与 ("wait", (另一条流, 那条流上的记录点))
        self._items: list[tuple[str, object]] = []
        self._done = 0  # 已经执行到第几项

    def submit(self, fn: Callable[[], object]) -> None:
        self._items.append(("work", fn))

    def wait_event(self, event: Event) -> None:
        if event._stream is not None:  # 按调用这一刻的记录点：之后 event 再 record 不影响
            self._items.append(("wait", (event._stream, event._mark)))

    def _run_until(self, mark: int) -> None:
        while self._done < mark:
            kind, payload = self._items[self._done]
            self._done += 1  # 先记下：等待项里的依赖链不会绕回到这一项之后
            if kind == "work":
                payload()  # type: ignore[operator]
            else:
                stream, upto = payload  # type: ignore[misc]
                stream._run_until(upto)

    def synchronize(self) -> None:
        self._run_until(len(self._items))

    def pending(self) -> int:
        return sum(kind == "work" for kind, _ in self._items[self._done :])


class Event:
    def __init__(self) -> None:
        self._stream: Stream | None = None
        self._mark = 0

    def record(self, stream: Stream) -> None:
        self._stream = stream
        self._mark = len(stream._items)

    def query(self) -> bool:
        return self._stream is None or self._stream._done >= self._mark

    def synchronize(self) -> None:
        if self._stream is not None:
            self._stream._run_until(self._mark)
