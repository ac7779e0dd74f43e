"""060 的隐藏测试：任务进种子、不碰全局随机数、数的范围、提示的格式、写法的覆盖、参数检查。"""

import random
import re

from solution import make_list_examples

HEADS = {"sort": ("Sort", "sort", "排序"), "reverse": ("Reverse", "reverse", "倒过来")}
SEPARATORS = (" ", ", ", ",", "，", "， ")
PROMPT = re.compile(r"(?P<head>[^:：]+)(?P<colon>[:：])(?P<gap> ?)(?P<body>[0-9].*)")


def parse(prompt):
    """(开头, 冒号, 空格, 数, 分隔符)；分隔符不统一时 sep 为 None。"""
    m = PROMPT.fullmatch(prompt)
    assert m, f"提示的格式不对：{prompt!r}"
    body = m.group("body")
    numbers = re.findall(r"[0-9]+", body)
    seps = set(re.findall(r"[^0-9]+", body))
    sep = seps.pop() if len(seps) == 1 else (" " if not seps else None)
    if len(numbers) < 2:
        sep = "?"
    return m.group("head"), m.group("colon"), m.group("gap"), [int(x) for x in numbers], sep


def test_returns_list_of_string_pairs():
    out = make_list_examples(3, "reverse", 4)
    assert type(out) is list and len(out) == 4
    for item in out:
        assert type(item) is tuple and len(item) == 2
        assert type(item[0]) is str and type(item[1]) is str
    assert make_list_examples(3, "sort", 0) == []


def test_task_is_part_of_the_seed():
    for seed in range(5):
        sort_numbers = [parse(p)[3] for p, _ in make_list_examples(seed, "sort", 20)]
        reverse_numbers = [parse(p)[3] for p, _ in make_list_examples(seed, "reverse", 20)]
        assert sort_numbers != reverse_numbers


def test_global_random_state_untouched():
    random.seed(123)
    expected = [random.random() for _ in range(3)]
    random.seed(123)
    make_list_examples(5, "sort", 30)
    make_list_examples(5, "reverse", 30)
    assert [random.random() for _ in range(3)] == expected


def test_global_random_state_does_not_matter():
    random.seed(1)
    a = make_list_examples(9, "reverse", 10)
    random.seed(2)
    random.random()
    assert make_list_examples(9, "reverse", 10) == a


def test_long_prefix():
    full = make_list_examples(11, "reverse", 200)
    for n in (1, 37, 199):
        assert make_list_examples(11, "reverse", n) == full[:n]


def test_prompt_format_and_answer():
    for task in ("sort", "reverse"):
        for prompt, answer in make_list_examples(21, task, 600):
            head, colon, gap, numbers, sep = parse(prompt)
            assert head in HEADS[task], prompt
            if colon == ":":
                assert gap == " ", f"半角冒号后面要有空格：{prompt!r}"
            assert sep is not None and (sep == "?" or sep in SEPARATORS), prompt
            assert 2 <= len(numbers) <= 8, prompt
            assert all(0 <= x <= 99 for x in numbers), prompt
            expected = sorted(numbers) if task == "sort" else numbers[::-1]
            assert answer == " ".join(map(str, expected)), (prompt, answer)


def test_every_form_appears():
    for task in ("sort", "reverse"):
        parsed = [parse(p) for p, _ in make_list_examples(4, task, 800)]
        assert {h for h, *_ in parsed} == set(HEADS[task])
        assert {c for _, c, *_ in parsed} == {":", "："}
        assert {(c, g) for _, c, g, *_ in parsed} >= {(":", " "), ("：", " "), ("：", "")}
        assert {s for *_, s in parsed} - {"?"} == set(SEPARATORS)


def test_bounds_are_inclusive():
    lengths, values = set(), set()
    for task in ("sort", "reverse"):
        for prompt, _ in make_list_examples(33, task, 1500):
            numbers = parse(prompt)[3]
            lengths.add(len(numbers))
            values.update(numbers)
    assert lengths == set(range(2, 9))
    assert values == set(range(100))


def test_duplicates_are_kept():
    seen = 0
    for prompt, answer in make_list_examples(17, "sort", 500):
        numbers = parse(prompt)[3]
        assert len(answer.split()) == len(numbers), (prompt, answer)
        seen += len(set(numbers)) < len(numbers)
    assert seen > 0


def test_unknown_task():
    for task in ("repeat", "Sort", ""):
        try:
            make_list_examples(1, task, 1)
        except ValueError:
            continue
        raise AssertionError(f"task={task!r} 应该抛 ValueError")
