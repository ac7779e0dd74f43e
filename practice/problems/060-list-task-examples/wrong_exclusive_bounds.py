"""错误答案：用 randrange 取数和个数，上界取不到：永远没有 99，也没有 8 个数的题。"""

from __future__ import annotations

import random

HEADS = {"sort": ("Sort", "sort", "排序"), "reverse": ("Reverse", "reverse", "倒过来")}
SEPARATORS = (" ", ", ", ",", "，", "， ")


def _example(rng: random.Random, task: str) -> tuple[str, str]:
    numbers = [rng.randrange(0, 99) for _ in range(rng.randrange(2, 8))]
    head = rng.choice(HEADS[task])
    colon = rng.choice((":", "："))
    gap = " " if colon == ":" or rng.random() < 0.5 else ""
    prompt = f"{head}{colon}{gap}{rng.choice(SEPARATORS).join(map(str, numbers))}"
    result = sorted(numbers) if task == "sort" else numbers[::-1]
    return prompt, " ".join(map(str, result))


def make_list_examples(seed: int, task: str, n: int) -> list[tuple[str, str]]:
    """n 道 (提示, 回答)；task 是 "sort" 或 "reverse"；同样的参数永远得到同样的题。"""
    if task not in HEADS:
        raise ValueError(f"task 应为 sort 或 reverse，不是 {task!r}")
    rng = random.Random(f"{seed}:{task}")
    return [_example(rng, task) for _ in range(n)]
