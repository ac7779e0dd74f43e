"""演示模型的课程：题目按种子确定，问法有各种写法，参考回答得满分，错的回答得零分。"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chat_curriculum import TASKS, Example, make_examples, score  # noqa: E402


def test_same_seed_same_questions() -> None:
    for task in TASKS:
        assert make_examples(1, task, 50) == make_examples(1, task, 50)
        assert make_examples(1, task, 50) != make_examples(2, task, 50)


@pytest.mark.parametrize("task", TASKS)
def test_reference_answers_score_and_wrong_ones_do_not(task: str) -> None:
    for ex in make_examples(7, task, 300):
        assert score(ex, ex.answer), ex
        assert not score(ex, "I do not know."), ex


def test_add_sub_answers_are_correct_and_cover_both_languages() -> None:
    examples = make_examples(3, "add_sub", 2000)
    for ex in examples:
        a, op, b = re.findall(r"\d+|[+-]|加|减", ex.prompt)[:3]
        want = int(a) + int(b) if op in "+加" else int(a) - int(b)
        assert ex.answer.endswith(f"= {want}") and ex.expected == str(want)
        if want < 0:
            assert ex.answer == f"{a} - {b} = -({b} - {a}) = {want}"
    prompts = [ex.prompt for ex in examples]
    assert any(p.startswith("What is") for p in prompts)
    assert any(p.startswith("what is") for p in prompts)
    assert any("加" in p for p in prompts) and any("减" in p for p in prompts)
    assert any("？" in p for p in prompts) and any(p.endswith("?") for p in prompts)
    assert any(re.search(r"\d[+-]\d", p) for p in prompts)  # 运算符两边没有空格
    assert any(int(ex.expected) < 0 for ex in examples)


def test_lists_use_every_separator_and_the_answer_is_sorted_or_reversed() -> None:
    for task in ("sort", "reverse"):
        examples = make_examples(4, task, 1000)
        for ex in examples:
            numbers = [int(x) for x in re.findall(r"\d+", ex.prompt)]
            want = sorted(numbers) if task == "sort" else numbers[::-1]
            assert ex.answer == " ".join(map(str, want))
            assert 2 <= len(numbers) <= 8 and all(0 <= n <= 99 for n in numbers)
        prompts = [ex.prompt for ex in examples]
        for mark in (",", "，", "：", ":"):
            assert any(mark in p for p in prompts), mark


def test_repeat_copies_the_text_with_the_same_separator() -> None:
    for ex in make_examples(5, "repeat", 500):
        words = ex.expected.split()
        assert 1 <= len(words) <= 8 and all(re.fullmatch(r"[a-z]{2,10}", w) for w in words)
        sep = re.search(r"[:：] ?$", ex.prompt[: -len(ex.expected)])
        assert sep is not None and ex.answer.endswith(sep.group() + ex.expected)


def test_score_is_strict() -> None:
    ex = Example("sort", "Sort: 3 1 2", "1 2 3", "1 2 3")
    assert score(ex, "1 2 3") and score(ex, " 1, 2, 3 ")
    assert not score(ex, "1 2 3 4") and not score(ex, "1 3 2")
    arith = Example("add_sub", "What is 5 - 7?", "5 - 7 = -2", "-2")
    assert score(arith, "5 - 7 = -2") and not score(arith, "5 - 7 = 2")
    assert not score(arith, "-2 is not 5 - 7 = 3")
    rep = Example("repeat", "Repeat after me: ab cd", "You said: ab cd", "ab cd")
    assert score(rep, "You said: ab cd") and not score(rep, "You said: ab cde")
    assert not score(rep, "You said: xab cd")


def test_operand_lengths_are_balanced_and_the_colon_may_be_missing() -> None:
    """人们最常问的是 2 + 2 这样的小数：每种位数（1～4 位）的操作数各占约四分之一。"""
    from collections import Counter

    lengths: Counter[int] = Counter()
    for ex in make_examples(8, "add_sub", 4000):
        a, b = re.findall(r"\d+", ex.prompt)[:2]
        lengths.update([len(a), len(b)])
    assert set(lengths) == {1, 2, 3, 4}
    assert all(1600 < n < 2400 for n in lengths.values()), lengths
    prompts = [ex.prompt for ex in make_examples(9, "sort", 1000)]
    assert any(re.match(r"(?i)sort \d", p) for p in prompts)
    assert any(re.match(r"排序 ?\d", p) for p in prompts)
