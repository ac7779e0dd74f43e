"""练习 032：重叠调度的记账——晚一步处理结果，多算的 token 扔掉。"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Trace:
    """一次模拟的记录（已经写好，不要改）。"""

    batches: list[list[int]] = field(default_factory=list)  # 每一轮发射的请求，uid 升序
    outputs: dict[int, list[int]] = field(default_factory=dict)  # 每个请求输出的 token 下标
    discarded: list[tuple[int, int]] = field(default_factory=list)  # 扔掉的 (uid, k)，按处理顺序


def run_loop(reqs: list[tuple[int, int]], max_running: int, overlap: bool) -> Trace:
    """模拟调度循环。reqs[uid] = (arrive, n_tokens)，最后一个 token（k = n_tokens - 1）是 EOS。

    每一轮：按 (arrive, uid) 收请求（最多 max_running 个在运行）→ 发射所有正在运行的请求 →
    处理这一轮（overlap=False）或上一轮（overlap=True）的结果。已经结束的请求的结果扔掉。
    参数不合法时抛 ValueError。
    """
    raise NotImplementedError("在这里实现 run_loop")
