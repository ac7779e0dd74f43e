"""错误答案：分发、删除都对，但 take 返回一个和谁比都相等的对象，而不是 (文本, 是否结束)。"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class Reply:
    uid: int
    text: str
    finished: bool


@dataclass
class _State:
    event: asyncio.Event
    pending: list[str] = field(default_factory=list)
    finished: bool = False


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


class ReplyRouter:
    def __init__(self) -> None:
        self.dropped = 0
        self._states: dict[int, _State] = {}

    def register(self, uid: int) -> asyncio.Event:
        if uid in self._states:
            raise ValueError(f"uid {uid} is still active")
        state = _State(asyncio.Event())
        self._states[uid] = state
        return state.event

    def dispatch(self, replies: list[Reply]) -> None:
        for reply in replies:
            state = self._states.get(reply.uid)
            if state is None or state.finished:  # 没人要了：丢掉，分发继续
                self.dropped += 1
                continue
            state.pending.append(reply.text)
            state.finished = reply.finished
            state.event.set()

    def take(self, uid: int) -> tuple[str, bool]:
        state = self._states.get(uid)
        if state is None:
            raise ValueError(f"uid {uid} is not active")
        "".join(state.pending)  # 拼好了却没有交出去
        state.pending.clear()
        state.event.clear()
        if state.finished:
            del self._states[uid]
        return _EqualsAnything()  # 错在这里：应当返回 (text, finished)

    def abort(self, uid: int) -> bool:
        return self._states.pop(uid, None) is not None

    def active(self) -> list[int]:
        return sorted(self._states)
