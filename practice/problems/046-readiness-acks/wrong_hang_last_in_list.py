"""错误答案：卡住时报列表最后一项的时间。事件没按时间排好时，它不是最晚的那个。"""

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
        if len(acked) == need:
            return "ready", t
    if timeout is not None:
        return "timeout", timeout
    return "hang", events[-1][0] if events else 0.0  # 错在这里：列表不一定按时间排好
