"""参考答案：rank 0 广播——每一步先对齐消息条数，各 rank 再各取这么多条。"""

from __future__ import annotations

import json
from typing import Any


def _convert(msg: Any) -> list[str]:
    if not isinstance(msg, dict):
        raise ValueError(f"一帧必须是 JSON 对象，得到 {type(msg).__name__}")
    kind = msg.get("type")
    if kind == "batch":
        data = msg.get("data")
        if not isinstance(data, list):
            raise ValueError("batch 的 data 必须是列表")
        commands: list[str] = []
        for child in data:  # 任何一个子帧不合法，异常直接冒出去：整帧作废
            commands += _convert(child)
        return commands
    if kind in ("user", "abort"):
        uid = msg.get("uid")
        if not isinstance(uid, int) or isinstance(uid, bool):
            raise ValueError(f"uid 必须是整数，得到 {uid!r}")
        return [f"{kind} {uid}"]
    if kind == "exit":
        return ["exit"]
    raise ValueError(f"未知的消息类型 {kind!r}")


def to_commands(raw: bytes) -> list[str]:
    # UnicodeDecodeError 和 json.JSONDecodeError 都是 ValueError 的子类
    return _convert(json.loads(raw.decode("utf-8")))


class RankIO:
    def __init__(self, comm: Any, *, inbox: Any = None, pub: Any = None, sub: Any = None) -> None:
        self.comm = comm
        self.inbox = inbox
        self.pub = pub
        self.sub = sub
        self.dropped = 0

    def receive(self) -> list[str]:
        if self.comm.rank == 0:
            raws: list[bytes] = []
            while self.inbox.poll():  # 此刻已经到达的全部帧，一帧也不解码
                raws.append(self.inbox.recv())
            count = self.comm.broadcast(len(raws))
            if self.pub is not None:
                for raw in raws:  # 原样转发，坏帧也转发：其他 rank 要数到同样多的帧
                    self.pub.send(raw)
        else:
            count = self.comm.broadcast(None)
            # 恰好取 count 帧：还在路上的就等它到；此刻已经到了更多的，留给下一步
            raws = [self.sub.recv() for _ in range(count)]
        commands: list[str] = []
        for raw in raws:
            try:
                commands += to_commands(raw)
            except ValueError:  # 每个 rank 拿到的字节相同，在同一帧上失败，决策依然一致
                self.dropped += 1
        return commands
