"""错误答案：检查都做了，但 wait_until_ready 返回一个和谁比都相等、下标取出来还是它自己的对象。"""

from __future__ import annotations


def expected_acks(tp: int, num_tokenizer: int) -> int:
    if tp < 1 or num_tokenizer < 0:
        raise ValueError(f"need tp >= 1 and num_tokenizer >= 0, got {tp}, {num_tokenizer}")
    return num_tokenizer + 2  # rank 0 + detokenizer + 每个 tokenizer


def process_names(tp: int, num_tokenizer: int) -> list[str]:
    expected_acks(tp, num_tokenizer)  # 借它检查参数
    names = [f"scheduler-{i}" for i in range(tp)] + ["detokenizer"]
    return names + [f"tokenizer-{i}" for i in range(num_tokenizer)]


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __getitem__(self, index):
        return self

    __hash__ = None


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
            return _EqualsAnything()
        if kind != "ack":
            raise ValueError(f"unknown event kind {kind!r}")
        if name.startswith("scheduler-") and name != "scheduler-0":
            raise ValueError(f"only rank 0 sends an ack, got one from {name}")
        if name in acked:
            raise ValueError(f"{name} sent two acks")
        acked.add(name)
        if len(acked) == need:
            return _EqualsAnything()  # 错在这里：不是 (str, float) 的元组
    if timeout is not None:
        return _EqualsAnything()
    return _EqualsAnything()
