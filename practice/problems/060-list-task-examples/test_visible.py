"""060 的可见测试：确定、前缀不变、换种子换题、回答的格式。"""

import re

from solution import make_list_examples


def test_same_seed_same_examples():
    assert make_list_examples(7, "sort", 3) == make_list_examples(7, "sort", 3)


def test_prefix_does_not_depend_on_n():
    assert make_list_examples(7, "sort", 5)[:3] == make_list_examples(7, "sort", 3)


def test_other_seed_other_examples():
    assert make_list_examples(7, "sort", 20) != make_list_examples(8, "sort", 20)


def test_answers_are_sorted_or_reversed():
    for task in ("sort", "reverse"):
        for prompt, answer in make_list_examples(1, task, 50):
            numbers = [int(x) for x in re.findall(r"[0-9]+", prompt)]
            expected = sorted(numbers) if task == "sort" else numbers[::-1]
            assert answer == " ".join(map(str, expected)), (prompt, answer)
