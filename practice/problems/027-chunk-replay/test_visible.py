"""027 的可见测试。"""

from solution import collect_outputs, replay

PROMPT_LENS = {0: 10, 1: 3, 2: 20}
STEPS = [
    [(0, 7)],
    [(0, 3), (1, 3), (2, 1)],
    [(2, 7)],
    [(2, 7)],
    [(2, 5)],
    [(0, 1), (1, 1), (2, 1)],
]
TOKENS = [[11], [12, 13, 14], [15], [16], [17], [18, 19, 20]]


def _raises_value_error(func, *args):
    try:
        value = func(*args)
    except ValueError:
        return
    raise AssertionError(f"应当抛出 ValueError，实际返回了 {value!r}")


def test_replay_example():
    assert replay(PROMPT_LENS, STEPS) == [
        [(0, 0, 7, False)],
        [(0, 7, 10, True), (1, 0, 3, True), (2, 0, 1, False)],
        [(2, 1, 8, False)],
        [(2, 8, 15, False)],
        [(2, 15, 20, True)],
        [(0, 10, 11, True), (1, 3, 4, True), (2, 20, 21, True)],
    ]


def test_collect_example():
    assert collect_outputs(PROMPT_LENS, STEPS, TOKENS) == {0: [12, 18], 1: [13, 19], 2: [17, 20]}


def test_chunk_past_the_end():
    _raises_value_error(replay, {0: 3}, [[(0, 2)], [(0, 2)]])


def test_mixed_step():
    _raises_value_error(replay, {0: 3, 1: 2}, [[(0, 3)], [(0, 1), (1, 2)]])
