"""参考答案：每个进程记一个"退出时刻"和"是不是自己退出的"；join 把时间推到退出时刻或时限。"""

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
    # 每个进程的退出时刻（inf：还没有退出的打算）和退出方式；崩掉的进程早就不在了
    exit_at = {id(p): (-math.inf if not p.alive else math.inf) for p in procs}
    graceful = {id(p): False for p in procs}

    def alive(p: Proc) -> bool:
        return exit_at[id(p)] > now

    def plan_exit(p: Proc, delay: float | None) -> None:
        if delay is not None and now + delay < exit_at[id(p)]:
            exit_at[id(p)] = now + delay
            graceful[id(p)] = True

    def join(p: Proc, limit: float) -> None:
        nonlocal now
        now = max(now, min(exit_at[id(p)], now + limit))

    schedulers = [p for p in procs if p.kind == "scheduler" and alive(p)]
    if schedulers:
        actions.append((now, "send", "ExitMsg"))
        deadline = now + timeout
        for p in schedulers:
            plan_exit(p, p.on_exit_msg)
        for p in schedulers:
            join(p, max(0.0, deadline - now))
        actions.append((now, "close", "exit sender"))
    terminated = [p for p in procs if alive(p)]
    for p in terminated:
        actions.append((now, "terminate", p.name))
        plan_exit(p, p.on_sigterm)
    for p in terminated:
        join(p, grace)
        if alive(p):
            actions.append((now, "kill", p.name))
            exit_at[id(p)], graceful[id(p)] = now, False
    removed = {p.socket_file for p in procs if graceful[id(p)] and not alive(p)}
    for f in files:
        if f not in removed:
            actions.append((now, "unlink", f))
    return actions
