"""错误答案：该报错时报错，但 problems 不是字符串列表，而是一个和谁比都相等的对象。"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator


@dataclass
class Param:
    """代替张量：只有形状和 dtype。"""

    shape: tuple[int, ...]
    dtype: str = "float32"


class _EqualsAnything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


class StateDictError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = _EqualsAnything()  # 错在这里：应当是那个问题列表


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
                raise TypeError(f"{type(self).__name__}.{name} 是普通列表，请用 OpList")

    def _slots(self, prefix: str = "") -> Iterator[tuple[str, Op, str, Param]]:
        for name, value in self._children():
            full = _join(prefix, name)
            if isinstance(value, Op):
                yield from value._slots(full)
            else:
                assert isinstance(value, Param)
                yield full, self, name, value

    def state_dict(self, prefix: str = "") -> dict[str, Param]:
        return {full: p for full, _, _, p in self._slots(prefix)}

    def load_state_dict(self, state: dict[str, Param]) -> None:
        slots = list(self._slots())
        names = {full for full, _, _, _ in slots}
        problems = [f"missing: {full}" for full, _, _, _ in slots if full not in state]
        problems += [f"unexpected: {k}" for k in sorted(state) if k not in names]
        for full, _, _, old in slots:
            new = state.get(full)
            if new is None:
                continue
            if new.shape != old.shape:
                problems.append(f"shape: {full} expected {old.shape} got {new.shape}")
            elif new.dtype != old.dtype:
                problems.append(f"dtype: {full} expected {old.dtype} got {new.dtype}")
        if problems:
            raise StateDictError(problems)
        for full, owner, name, _ in slots:  # 全部检查通过之后才替换
            setattr(owner, name, state[full])


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
