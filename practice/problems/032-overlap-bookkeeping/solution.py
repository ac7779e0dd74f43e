"""参考答案：普通循环与重叠循环的记账。"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Trace:
    batches: list[list[int]] = field(default_factory=list)
    outputs: dict[int, list[int]] = field(default_factory=dict)
    discarded: list[tuple[int, int]] = field(default_factory=list)


def run_loop(reqs: list[tuple[int, int]], max_running: int, overlap: bool) -> Trace:
    if max_running < 1:
        raise ValueError(f"max_running 必须 >= 1，得到 {max_running}")
    for uid, (arrive, n_tokens) in enumerate(reqs):
        if arrive < 0 or n_tokens < 1:
            raise ValueError(f"请求 {uid}：arrive={arrive}, n_tokens={n_tokens}")
    trace = Trace(outputs={uid: [] for uid in range(len(reqs))})
    waiting = sorted(range(len(reqs)), key=lambda uid: (reqs[uid][0], uid))
    running: set[int] = set()  # 主机眼里还在跑的请求（占着一行）
    finished: set[int] = set()
    launched = [0] * len(reqs)  # 设备上已经发射了几个 token
    in_flight: list[tuple[int, int]] = []  # 上一轮发射、还没处理的 (uid, k)
    step = 0
    while len(finished) < len(reqs) or in_flight:  # 重叠时最后还有一批在路上
        while waiting and len(running) < max_running and reqs[waiting[0]][0] <= step:
            running.add(waiting.pop(0))
        batch = sorted(running)
        launch = [(uid, launched[uid]) for uid in batch]
        for uid in batch:
            launched[uid] += 1
        trace.batches.append(batch)
        if overlap:  # 先发射这一轮，再处理上一轮
            to_process, in_flight = in_flight, launch
        else:
            to_process = launch
        for uid, k in to_process:
            if uid in finished:  # 结束之后才处理到的多余 token
                trace.discarded.append((uid, k))
                continue
            trace.outputs[uid].append(k)
            if k == reqs[uid][1] - 1:
                finished.add(uid)
                running.discard(uid)
        step += 1
    return trace
