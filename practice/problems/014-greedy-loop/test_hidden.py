"""014 的隐藏测试：伪随机 logits 的长序列、并列最大值、一步就结束、参数检查、从不发空批次。"""

from solution import greedy_generate


def same(actual, expected):
    """类型和取值都一致才算对：type 逐层相同（list/tuple/dict 递归进去），最后才比 ==。

    只比 == 的话，返回 1 冒充 1.0、True 冒充 1，或者返回一个和谁比都相等的对象，都能蒙混过关。
    """
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(expected, dict):
        keys_match = actual.keys() == expected.keys()
        return keys_match and all(same(actual[k], expected[k]) for k in expected)
    return bool(expected == actual)


class HashModel:
    """logits 由"这个请求见过的全部 token"算出来（像一个真的带 KV 缓存的模型）。
    记下每次调用，并检查协议：不接受空批次，第一次见到的请求只能出现在第一次调用里。"""

    def __init__(self, vocab=50):
        self.vocab = vocab
        self.seen = {}
        self.calls = []

    def forward(self, batch):
        assert batch, "用空批次调用了模型"
        self.calls.append([(i, list(tokens)) for i, tokens in batch])
        rows = []
        for i, tokens in batch:
            if i not in self.seen:
                assert same(len(self.calls), 1), (
                    f"请求 {i} 第一次出现在第 {len(self.calls)} 次调用里"
                )
            history = self.seen.setdefault(i, [])
            history.extend(tokens)
            x = 17
            for t in history:
                x = (x * 1000003 + t + 1) % 2147483647
            rows.append([((x ^ (v * 2654435761)) % 100003) / 7.0 for v in range(self.vocab)])
        return rows


class Scripted:
    """按剧本返回 logits：第 k 次调用时每个请求都拿到 script[k]。"""

    def __init__(self, script):
        self.script = script
        self.calls = 0

    def forward(self, batch):
        row = self.script[self.calls]
        self.calls += 1
        return [list(row) for _ in batch]


def _raises_value_error(func, *args, **kwargs):
    try:
        value = func(*args, **kwargs)
    except ValueError:
        return
    raise AssertionError(f"应当抛出 ValueError，实际返回了 {value!r}")


PROMPTS = [[3, 14, 15, 9, 2, 6], [5], [35, 8, 9, 7]]


def test_long_generation():
    model = HashModel()
    out = greedy_generate(model, PROMPTS, 12)
    assert same(
        out,
        [
            [40, 1, 40, 19, 30, 17, 27, 45, 14, 15, 24, 24],
            [46, 16, 17, 0, 19, 18, 43, 24, 14, 16, 45, 48],
            [44, 25, 12, 0, 24, 44, 24, 40, 24, 39, 40, 34],
        ],
    )
    assert same(len(model.calls), 12)
    # 模型看到的历史 = 提示 + 除最后一个之外的全部输出：没有重复送，也没有漏送
    for i, prompt in enumerate(PROMPTS):
        assert same(model.seen[i], prompt + out[i][:-1])


def test_stop_in_a_long_generation():
    model = HashModel()
    out = greedy_generate(model, PROMPTS, 12, stop_ids=frozenset({30, 17}))
    assert same(
        out,
        [
            [40, 1, 40, 19, 30],
            [46, 16, 17],
            [44, 25, 12, 0, 24, 44, 24, 40, 24, 39, 40, 34],
        ],
    )
    assert same([len(c) for c in model.calls], [3, 3, 3, 2, 2] + [1] * 7)
    assert same([i for i, _ in model.calls[3]], [0, 2])


def test_every_decode_item_is_the_last_token():
    model = HashModel()
    out = greedy_generate(model, PROMPTS, 7)
    assert same(model.calls[0], [(i, p) for i, p in enumerate(PROMPTS)])
    for step, call in enumerate(model.calls[1:], start=1):
        assert same(call, [(i, [out[i][step - 1]]) for i in range(3)])


def test_ties_pick_the_smallest_index():
    model = Scripted([[0.0, 2.0, 5.0, 5.0, 1.0], [3.0, 3.0, 3.0, 0.0, 0.0]])
    assert same(greedy_generate(model, [[1]], 2), [[2, 0]])


def test_negative_logits():
    model = Scripted([[-5.0, -1.0, -3.0], [-2.0, -7.0, -0.5]])
    assert same(greedy_generate(model, [[0]], 2), [[1, 2]])


def test_one_token_and_stop_on_the_first_step():
    assert same(greedy_generate(HashModel(), PROMPTS, 1), [[40], [46], [44]])
    model = HashModel()
    stop = frozenset({40, 46, 44})
    assert same(greedy_generate(model, PROMPTS, 5, stop_ids=stop), [[40], [46], [44]])
    assert same(len(model.calls), 1)


def test_prompts_are_not_modified():
    prompts = [list(p) for p in PROMPTS]
    greedy_generate(HashModel(), prompts, 4)
    assert same(prompts, PROMPTS)


def test_bad_arguments_call_nothing():
    model = HashModel()
    _raises_value_error(greedy_generate, model, PROMPTS, 0)
    _raises_value_error(greedy_generate, model, [], 3)
    _raises_value_error(greedy_generate, model, [[1], []], 3)
    assert same(model.calls, [])
