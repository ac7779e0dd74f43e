"""错误答案：反分词都对，但 active 返回一个和谁比都相等的对象，而不是请求个数。"""

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


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


class Detokenizer:
    def __init__(self, token_bytes: dict[int, bytes], stop_ids: set[int]) -> None:
        self.token_bytes = token_bytes
        self.stop_ids = set(stop_ids)
        self.pending: dict[int, bytes] = {}  # uid → 还没发出去的字节（结尾不完整的字符）

    def step(self, msgs: list[tuple[int, int, bool]]) -> list[str]:
        out = []
        for uid, token, finished in msgs:
            data = self.pending.get(uid, b"")
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
        return _EqualsAnything()  # 错在这里：应当返回 len(self.pending)
