"""练习 060：确定地出排序题和倒序题——同一个种子，同一批题。"""

from __future__ import annotations

import random  # noqa: F401 - 用 random.Random，不用全局的随机数


def make_list_examples(seed: int, task: str, n: int) -> list[tuple[str, str]]:
    """n 道 (提示, 回答)；task 是 "sort" 或 "reverse"；同样的参数永远得到同样的题。"""
    raise NotImplementedError("在这里实现 make_list_examples")
