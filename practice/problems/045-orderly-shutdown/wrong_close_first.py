"""错误答案：发完 ExitMsg 马上关掉发送的 socket，再等调度器——linger=0 时那条消息可能根本没送出去；
而且删文件时不看它还在不在（被主人删掉的文件再删一次）。"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Proc:
    name: str
    kind: str
    alive: bool = True
    on_exit_msg: float | None = None
    on_sigterm: float | None = 0.0
    socket_file: str | None = None


def shutdown(
    procs: list[Proc], files: list[str], timeout: float = 10.0, grace: float = 5.0
) -> list[tuple[float, str, str]]:
    now = 0.0
    actions: list[tuple[float, str, str]] = []
    exit_at = {id(p): (-math.inf if not p.alive else math.inf) for p in procs}

    def alive(p: Proc) -> bool:
        return exit_at[id(p)] > now

    def join(p: Proc, limit: float) -> None:
        nonlocal now
        now = max(now, min(exit_at[id(p)], now + limit))

    schedulers = [p for p in procs if p.kind == "scheduler" and alive(p)]
    if schedulers:
        actions.append((now, "send", "ExitMsg"))
        actions.append((now, "close", "exit sender"))  # 错：应该等调度器退出之后再关
        deadline = now + timeout
        for p in schedulers:
            if p.on_exit_msg is not None:
                exit_at[id(p)] = min(exit_at[id(p)], now + p.on_exit_msg)
        for p in schedulers:
            join(p, max(0.0, deadline - now))
    terminated = [p for p in procs if alive(p)]
    for p in terminated:
        actions.append((now, "terminate", p.name))
        if p.on_sigterm is not None:
            exit_at[id(p)] = min(exit_at[id(p)], now + p.on_sigterm)
    for p in terminated:
        join(p, grace)
        if alive(p):
            actions.append((now, "kill", p.name))
            exit_at[id(p)] = now
    return actions + [(now, "unlink", f) for f in files]  # 错：不管文件还在不在
