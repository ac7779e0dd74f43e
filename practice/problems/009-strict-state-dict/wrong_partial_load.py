"""错误答案：一边检查一边替换——出错时前面的权重已经换掉了，留下一个加载了一半的模型。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator


@dataclass
class Param:
    shape: tuple[int, ...]
    dtype: str = "float32"


class StateDictError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class Op:
    def _children(self) -> Iterator[tuple[str, object]]:
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (Param, Op)):
                yield name, value
            elif isinstance(value, (list, tuple)) and any(
                isinstance(v, (Param, Op)) for v in value
            ):
                raise TypeError(f"{name} 是普通列表")

    def _slots(self, prefix: str = "") -> Iterator[tuple[str, Op, str, Param]]:
        for name, value in self._children():
            full = _join(prefix, name)
            if isinstance(value, Op):
                yield from value._slots(full)
            else:
                yield full, self, name, value

    def state_dict(self, prefix: str = "") -> dict[str, Param]:
        return {full: p for full, _, _, p in self._slots(prefix)}

    def load_state_dict(self, state: dict[str, Param]) -> None:
        slots = list(self._slots())
        names = {full for full, _, _, _ in slots}
        problems = [f"missing: {full}" for full, _, _, _ in slots if full not in state]
        problems += [f"unexpected: {k}" for k in sorted(state) if k not in names]
        for full, owner, name, old in slots:
            new = state.get(full)
            if new is None:
                continue
            if new.shape != old.shape:
                problems.append(f"shape: {full} expected {old.shape} got {new.shape}")
            elif new.dtype != old.dtype:
                problems.append(f"dtype: {full} expected {old.dtype} got {new.dtype}")
            else:
                setattr(owner, name, new)  # 错在这里：还没检查完就替换
        if problems:
            raise StateDictError(problems)


class OpList(Op):
    def __init__(self, ops: list[Op]) -> None:
        self._ops = list(ops)

    def _children(self) -> Iterator[tuple[str, object]]:
        for i, op in enumerate(self._ops):
            yield str(i), op

    def __getitem__(self, i: int) -> Op:
        return self._ops[i]

    def __len__(self) -> int:
        return len(self._ops)
