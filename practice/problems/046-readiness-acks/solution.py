"""参考答案：按时间处理事件；每个事件先检查合法性，再看是开门、失败，还是继续等。"""

from __future__ import annotations


def expected_acks(tp: int, num_tokenizer: int) -> int:
    if tp < 1 or num_tokenizer < 0:
        raise ValueError(f"need tp >= 1 and num_tokenizer >= 0, got {tp}, {num_tokenizer}")
    return num_tokenizer + 2  # rank 0 + detokenizer + 每个 tokenizer


def process_names(tp: int, num_tokenizer: int) -> list[str]:
    expected_acks(tp, num_tokenizer)  # 借它检查参数
    names = [f"scheduler-{i}" for i in range(tp)] + ["detokenizer"]
    return names + [f"tokenizer-{i}" for i in range(num_tokenizer)]


def wait_until_ready(
    events: list[tuple[float, str, str]],
    tp: int,
    num_tokenizer: int,
    timeout: float | None = None,
) -> tuple[str, float]:
    need = expected_acks(tp, num_tokenizer)
    known = set(process_names(tp, num_tokenizer))
    acked: set[str] = set()
    last = 0.0
    for t, name, kind in sorted(events, key=lambda e: e[0]):
        if timeout is not None and t > timeout:
            break
        if name not in known:
            raise ValueError(f"unknown process {name!r}")
        if kind == "exit":
            return f"failed: {name}", t
        if kind != "ack":
            raise ValueError(f"unknown event kind {kind!r}")
        if name.startswith("scheduler-") and name != "scheduler-0":
            raise ValueError(f"only rank 0 sends an ack, got one from {name}")
        if name in acked:
            raise ValueError(f"{name} sent two acks")
        acked.add(name)
        last = t
        if len(acked) == need:
            return "ready", t
    if timeout is not None:
        return "timeout", timeout
    return "hang", max((e[0] for e in events), default=last)
