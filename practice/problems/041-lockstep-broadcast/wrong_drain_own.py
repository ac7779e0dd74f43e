"""错误答案：其他 rank "有多少取多少"——SUB 里此刻到了几帧就处理几帧，广播来的条数不用。

链路快的时候看不出问题；帧晚到一点，这一步 rank 1 就比 rank 0 少几条命令，两边从此分道扬镳。
"""

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
            self.comm.broadcast(len(raws))
            if self.pub is not None:
                for raw in raws:  # 原样转发，坏帧也转发：其他 rank 要数到同样多的帧
                    self.pub.send(raw)
        else:
            self.comm.broadcast(None)  # 参加了广播，却不用它的值
            raws = []
            while self.sub.poll():
                raws.append(self.sub.recv())
        commands: list[str] = []
        for raw in raws:
            try:
                commands += to_commands(raw)
            except ValueError:  # 每个 rank 拿到的字节相同，在同一帧上失败，决策依然一致
                self.dropped += 1
        return commands
