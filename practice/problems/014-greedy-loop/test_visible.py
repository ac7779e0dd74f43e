"""014 的可见测试。"""

from solution import greedy_generate


class Echo:
    """示例里的模型：下一个 token 总是"看到的 token 之和 % 5"。记下每次调用的批次。"""

    def __init__(self):
        self.seen = {}
        self.calls = []

    def forward(self, batch):
        self.calls.append([(i, list(tokens)) for i, tokens in batch])
        rows = []
        for i, tokens in batch:
            self.seen.setdefault(i, []).extend(tokens)
            best = sum(self.seen[i]) % 5
            rows.append([1.0 if v == best else 0.0 for v in range(5)])
        return rows


def test_example():
    assert greedy_generate(Echo(), [[1, 2], [4]], 3) == [[3, 1, 2], [4, 3, 1]]


def test_example_with_stop():
    assert greedy_generate(Echo(), [[1, 2], [4]], 3, stop_ids=frozenset({1})) == [[3, 1], [4, 3, 1]]


def test_calls_prefill_then_one_token_per_request():
    model = Echo()
    greedy_generate(model, [[1, 2], [4]], 3)
    assert model.calls == [
        [(0, [1, 2]), (1, [4])],
        [(0, [3]), (1, [4])],
        [(0, [1]), (1, [3])],
    ]


def test_finished_request_leaves_the_batch():
    model = Echo()
    greedy_generate(model, [[1, 2], [4]], 3, stop_ids=frozenset({1}))
    assert model.calls[-1] == [(1, [3])]
    assert len(model.calls) == 3
