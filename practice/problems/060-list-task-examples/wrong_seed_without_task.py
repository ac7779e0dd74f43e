"""错误答案：种子里只有 seed，没有 task。同一个种子的排序题和倒序题是同一串数。"""

from __future__ import annotations

import random

HEADS = {"sort": ("Sort", "sort", "排序"), "reverse": ("Reverse", "reverse", "倒过来")}
SEPARATORS = (" ", ", ", ",", "，", "， ")


def _example(rng: random.Random, task: str) -> tuple[str, str]:
    numbers = [rng.randint(0, 99) for _ in range(rng.randint(2, 8))]
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
    rng = random.Random(seed)
    return [_example(rng, task) for _ in range(n)]
