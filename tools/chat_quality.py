"""演示模型答得怎么样：起一个真正的服务，用官方 ``openai`` 客户端贪心地问新出的题，逐类打分。

    python tools/chat_quality.py                 # 每类 200 题（CPU 上一两分钟）
    python tools/chat_quality.py --per-task 500 --seed 7 --model 别的模型

题目由 ``chat_curriculum.make_examples`` 用一个训练时没用过的种子现场出（训练用种子 0 的随机流，
训练日志里的评测用 ``train_chat_model.EVAL_SEED``）；打分就是 ``chat_curriculum.score``。
请求并发地发，服务自己把它们拼成批次：这也顺便考了批处理、分块和前缀缓存。
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chat_curriculum import TASKS, Example, make_examples, score  # noqa: E402

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


def measure(base_url: str, per_task: int, seed: int = QUALITY_SEED) -> list[TaskScore]:
    examples = [ex for task in TASKS for ex in make_examples(seed, task, per_task)]
    replies = ask_all(base_url, examples)
    scores = []
    for task in TASKS:
        pairs = [(ex, r) for ex, r in zip(examples, replies) if ex.task == task]
        wrong = tuple((ex.prompt, r) for ex, r in pairs if not score(ex, r))
        scores.append(TaskScore(task, len(pairs) - len(wrong), len(pairs), wrong[:5]))
    return scores


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
    args = ap.parse_args(argv)
    if args.url:
        scores = measure(args.url, args.per_task, args.seed)
    else:
        from minisgl.server.args import DEFAULT_MODEL
        from minisgl.server.launch import start_background_server

        model = args.model or str(DEFAULT_MODEL)
        server = start_background_server(model, "--dtype", "float32", name="chat-quality")
        try:
            scores = measure(server.url, args.per_task, args.seed)
        finally:
            server.stop()
    print(table(scores))
    for s in scores:
        for prompt, reply in s.wrong:
            print(f"答错（{s.task}）：{prompt!r} → {reply!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
