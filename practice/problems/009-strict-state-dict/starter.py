"""练习 009：严格的状态字典。Param 和 StateDictError 已经写好，实现 Op 和 OpList。"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Param:
    """代替张量：只有形状和 dtype。"""

    shape: tuple[int, ...]
    dtype: str = "float32"


class StateDictError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Op:
    def state_dict(self, prefix: str = "") -> dict[str, Param]:
        """{带点的全名: Param}，按属性定义顺序深度优先。

        跳过 _ 开头的属性和非 Param / Op 的值；普通列表里有层或 Param 就 TypeError。
        """
        raise NotImplementedError("在这里实现 state_dict")

    def load_state_dict(self, state: dict[str, Param]) -> None:
        """先检查 missing / unexpected / shape / dtype，一次报全；全部没问题才逐个 setattr 替换。"""
        raise NotImplementedError("在这里实现 load_state_dict")


class OpList(Op):
    def __init__(self, ops: list[Op]) -> None:
        """子层的名字是 "0"、"1"……"""
        raise NotImplementedError("在这里实现 OpList")

    def __getitem__(self, i: int) -> Op:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError
