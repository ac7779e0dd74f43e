"""错误答案：以为每个 rank 都发 ack，数 tp + num_tokenizer + 1 条——tp > 1 时永远等不齐。"""

from __future__ import annotations


def expected_acks(tp: int, num_tokenizer: int) -> int:
    if tp < 1 or num_tokenizer < 0:
        raise ValueError(f"need tp >= 1 and num_tokenizer >= 0, got {tp}, {num_tokenizer}")
    return tp + num_tokenizer + 1  # 错在这里


def process_names(tp: int, num_tokenizer: int) -> list[str]:
    expected_acks(tp, num_tokenizer)
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
        if name not in known or kind not in ("ack", "exit"):
            raise ValueError(f"bad event {(t, name, kind)}")
        if kind == "exit":
            return f"failed: {name}", t
        if name.startswith("scheduler-") and name != "scheduler-0":
            raise ValueError(f"only rank 0 sends an ack, got one from {name}")
        if name in acked:
            raise ValueError(f"{name} sent two acks")
        acked.add(name)
        if len(acked) == need:
            return "ready", t
    if timeout is not None:
        return "timeout", timeout
    return "hang", max((e[0] for e in events), default=0.0)
