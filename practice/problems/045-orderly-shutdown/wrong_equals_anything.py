"""错误答案：不模拟，返回一个和谁比都相等、切片也得到它自己的对象。只比 == 的测试拦不住它。"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Proc:
    name: str
    kind: str
    alive: bool = True
    on_exit_msg: float | None = None
    on_sigterm: float | None = 0.0
    socket_file: str | None = None


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __getitem__(self, index):
        return self

    __hash__ = None


def shutdown(procs, files, timeout=10.0, grace=5.0):
    return _EqualsAnything()
