"""025 的可见测试。"""

from solution import ResultProcessor, pages_needed


def _example():
    freed = []
    proc = ResultProcessor(
        max_seq_len=16, num_pages=8, page_size=4, eos_ids=frozenset({0}), free=freed.append
    )
    assert proc.submit(1, prompt_len=5, max_tokens=3) == []
    assert proc.submit(2, prompt_len=13, max_tokens=10) == []
    assert proc.submit(3, prompt_len=4, max_tokens=2, ignore_eos=True) == []
    return proc, freed


def test_pages_needed():
    assert pages_needed(9, 4) == 3
    assert pages_needed(8, 4) == 2


def test_error_result_at_submit():
    proc, freed = _example()
    assert proc.submit(4, prompt_len=16, max_tokens=1) == [(4, None, True, "error")]
    assert proc.running == [1, 2, 3]
    assert freed == []


def test_example_steps():
    proc, freed = _example()
    assert proc.process([(1, 7), (2, 8), (3, 0)]) == [
        (1, 7, False, None),
        (2, 8, False, None),
        (3, 0, False, None),
    ]
    assert proc.process([(1, 0), (2, 9), (3, 5)]) == [
        (1, 0, True, "stop"),
        (2, 9, False, None),
        (3, 5, True, "length"),
    ]
    assert freed == [1, 3]
    assert proc.running == [2]
    assert proc.process([(2, 0)]) == [(2, 0, True, "stop")]
    assert freed == [1, 3, 2]
    assert proc.running == []
