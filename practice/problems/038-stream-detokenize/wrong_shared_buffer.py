"""错误答案：所有请求共用一个字节缓冲。

两个请求的 token 交错到达时，一个请求的半个字符会接到另一个请求的字节上。
"""

from __future__ import annotations


def _incomplete_tail(data: bytes) -> int:
    """结尾那个还不完整的字符已经到了几个字节（0 表示结尾是完整的，或者是非法字节）。"""
    for back in range(1, min(3, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 == 0x80:  # 后续字节：再往前找首字节
            continue
        if 0xC2 <= b <= 0xDF:
            need = 2
        elif 0xE0 <= b <= 0xEF:
            need = 3
        elif 0xF0 <= b <= 0xF4:
            need = 4
        else:  # ASCII，或者不可能出现在 UTF-8 里的字节
            need = 0
        return back if back < need else 0
    return 0  # 全是后续字节（没有首字节）：非法，不用再等


class Detokenizer:
    def __init__(self, token_bytes: dict[int, bytes], stop_ids: set[int]) -> None:
        self.token_bytes = token_bytes
        self.stop_ids = set(stop_ids)
        self.pending: dict[int, bytes] = {}  # uid → 还没发出去的字节（结尾不完整的字符）

    def step(self, msgs: list[tuple[int, int, bool]]) -> list[str]:
        out = []
        for uid, token, finished in msgs:
            data = self.pending.get(0, b"")  # 错在这里：不区分请求
            uid = 0
            if token != -1 and not (finished and token in self.stop_ids):
                data += self.token_bytes[token]
            if finished:
                out.append(data.decode("utf-8", errors="replace"))
                self.pending.pop(uid, None)
                continue
            keep = _incomplete_tail(data)
            out.append(data[: len(data) - keep].decode("utf-8", errors="replace"))
            self.pending[uid] = data[len(data) - keep :]
        return out

    def abort(self, uid: int) -> None:
        self.pending.pop(uid, None)

    def active(self) -> int:
        return len(self.pending)
