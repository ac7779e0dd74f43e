"""演示模型答得怎么样：起一个真正的服务，用官方 ``openai`` 客户端贪心地问新出的题，逐类打分。

    python tools/chat_quality.py                 # 每类 200 题（CPU 上一两分钟）
    python tools/chat_quality.py --per-task 500 --seed 7 --model 别的模型
    python tools/chat_quality.py --limits        # 课程边界内外的几组题：它做不到什么

题目由 ``chat_curriculum.make_examples`` 用一个训练时没用过的种子现场出（训练用种子 0 的随机流，
训练日志里的评测用 ``train_chat_model.EVAL_SEED``）；打分就是 ``chat_curriculum.score``。
请求并发地发，服务自己把它们拼成批次：这也顺便考了批处理、分块和前缀缓存。
"""

from __future__ import annotations

import argparse
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chat_curriculum import (  # noqa: E402
    TASKS,
    Example,
    made_up_word,
    make_examples,
    number_with_digits,
    score,
)

QUALITY_SEED = 20261202  # 和训练、训练日志里的评测都不同的种子


@dataclass(frozen=True)
class TaskScore:
    task: str
    right: int
    total: int
    wrong: tuple[tuple[str, str], ...]  # 答错的（问题, 回答），最多留几个给人看

    @property
    def accuracy(self) -> float:
        return self.right / self.total


def ask_all(base_url: str, examples: list[Example], workers: int = 32) -> list[str]:
    """并发地问，贪心，返回和 ``examples`` 同顺序的回答。"""
    from openai import OpenAI

    # 连接出错时重试：空闲的 keep-alive 连接可能恰好在发请求的那一刻被服务端关掉（uvicorn 的
    # keep-alive 超时是 5 秒），请求根本没送到；贪心生成，重发得到的回答一样
    client = OpenAI(base_url=f"{base_url}/v1", api_key="none", max_retries=3, timeout=600)

    def ask(example: Example) -> str:
        reply = client.chat.completions.create(
            model="demo",
            messages=[{"role": "user", "content": example.prompt}],
            max_tokens=96,
            temperature=0,
        )
        return reply.choices[0].message.content or ""

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(ask, examples))


def measure_groups(
    base_url: str, groups: dict[str, list[Example]], keep_wrong: int = 5
) -> list[TaskScore]:
    """一次并发地问完所有组的题，逐组打分；每组留最多 ``keep_wrong`` 个答错的例子。"""
    examples = [ex for group in groups.values() for ex in group]
    replies = iter(ask_all(base_url, examples))
    scores = []
    for name, group in groups.items():
        pairs = [(ex, next(replies)) for ex in group]
        wrong = tuple((ex.prompt, r) for ex, r in pairs if not score(ex, r))
        scores.append(TaskScore(name, len(pairs) - len(wrong), len(pairs), wrong[:keep_wrong]))
    return scores


def measure(base_url: str, per_task: int, seed: int = QUALITY_SEED) -> list[TaskScore]:
    return measure_groups(base_url, {t: make_examples(seed, t, per_task) for t in TASKS})


def _sum_example(a: int, b: int) -> Example:
    return Example("add_sub", f"What is {a} + {b}?", "", str(a + b))


def _list_example(task: str, numbers: list[int]) -> Example:
    head, result = ("Sort", sorted(numbers)) if task == "sort" else ("Reverse", numbers[::-1])
    answer = " ".join(str(n) for n in result)
    return Example(task, f"{head}: {' '.join(str(n) for n in numbers)}", answer, answer)


def _repeat_example(words: list[str]) -> Example:
    text = " ".join(words)
    return Example("repeat", f"Repeat after me: {text}", "", text)


def limit_probes(seed: int, n: int = 40) -> dict[str, list[Example]]:
    """课程边界两侧的几组题：操作数的位数，以及比训练时更长的数列、更多的词。"""
    rng = random.Random(f"{seed}:limits")

    def words(k: int) -> list[str]:
        return [made_up_word(rng) for _ in range(k)]

    def numbers(lo: int, hi: int) -> list[int]:
        return [rng.randint(0, 99) for _ in range(rng.randint(lo, hi))]

    groups: dict[str, list[Example]] = {}
    for d in (1, 2, 3, 4):
        groups[f"加法，两个 {d} 位数"] = [
            _sum_example(number_with_digits(rng, d), number_with_digits(rng, d)) for _ in range(n)
        ]
    groups["加法，两个 5～6 位数（超出课程）"] = [
        _sum_example(
            number_with_digits(rng, rng.randint(5, 6)), number_with_digits(rng, rng.randint(5, 6))
        )
        for _ in range(n)
    ]
    groups["排序 8 个数"] = [_list_example("sort", numbers(8, 8)) for _ in range(n)]
    groups["排序 12～16 个数（超出课程）"] = [
        _list_example("sort", numbers(12, 16)) for _ in range(n)
    ]
    groups["倒过来 12～16 个数（超出课程）"] = [
        _list_example("reverse", numbers(12, 16)) for _ in range(n)
    ]
    groups["复述 8 个词"] = [_repeat_example(words(8)) for _ in range(n)]
    groups["复述 12～16 个词（超出课程）"] = [
        _repeat_example(words(rng.randint(12, 16))) for _ in range(n)
    ]
    return groups


def measure_limits(base_url: str, seed: int) -> list[TaskScore]:
    return measure_groups(base_url, limit_probes(seed), keep_wrong=2)


def table(scores: list[TaskScore]) -> str:
    lines = ["| 任务 | 题数 | 答对 | 准确率 |", "|---|---:|---:|---:|"]
    lines += [f"| {s.task} | {s.total} | {s.right} | {s.accuracy:.1%} |" for s in scores]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="不给时用服务的默认模型（models/demo-chat）")
    ap.add_argument("--per-task", type=int, default=200)
    ap.add_argument("--seed", type=int, default=QUALITY_SEED)
    ap.add_argument("--url", help="问一个已经在跑的服务（不给时自己起一个）")
    ap.add_argument("--limits", action="store_true", help="改问课程边界两侧的几组题")
    args = ap.parse_args(argv)

    def run(url: str) -> list[TaskScore]:
        if args.limits:
            return measure_limits(url, args.seed)
        return measure(url, args.per_task, args.seed)

    if args.url:
        scores = run(args.url)
    else:
        from minisgl.server.args import DEFAULT_MODEL
        from minisgl.server.launch import start_background_server

        model = args.model or str(DEFAULT_MODEL)
        server = start_background_server(model, "--dtype", "float32", name="chat-quality")
        try:
            scores = run(server.url)
        finally:
            server.stop()
    print(table(scores))
    for s in scores:
        for prompt, reply in s.wrong:
            print(f"答错（{s.task}）：{prompt!r} → {reply!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
