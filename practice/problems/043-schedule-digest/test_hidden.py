"""043 的隐藏测试：编码的校验、逐步的摘要值、长度不同、边界位置、访问次数。"""

import hashlib
import math
import random

from solution import encode_step, first_divergence, prefix_digests


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


def _raises(exc_type, func, *args):
    try:
        value = func(*args)
    except exc_type:
        return
    raise AssertionError(f"应当抛出 {exc_type.__name__}，实际返回了 {value!r}")


class Counted:
    """只读序列，数元素被访问了几次。"""

    def __init__(self, items, counter):
        self.items, self.counter = list(items), counter

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        if isinstance(i, slice):
            raise AssertionError("不要切片：切片会访问很多元素")
        self.counter[0] += 1
        return self.items[i]

    def __iter__(self):
        raise AssertionError("不要遍历整个序列：只能按下标访问")


def _limit(n):
    return 4 * (math.ceil(math.log2(n + 1)) + 2)


def test_encode_rejects_bad_input():
    _raises(ValueError, encode_step, "extend", [1], [1])
    _raises(ValueError, encode_step, "decode", [1, 2], [1])
    _raises(ValueError, encode_step, "prefill", [], [3])


def test_encode_large_numbers_and_tuples():
    assert same(encode_step("prefill", (12, 3), (100, 2048)), b"prefill|12,3|100,2048;")
    assert encode_step("prefill", [1, 23], [1, 1]) != encode_step("prefill", [12, 3], [1, 1])


def test_prefix_digests_every_step():
    rng = random.Random(5)
    steps = []
    for _ in range(30):
        k = rng.randrange(0, 4)
        phase = rng.choice(["prefill", "decode"])
        uids = rng.sample(range(100), k)
        lens = [rng.randrange(1, 50) if phase == "prefill" else 1 for _ in uids]
        steps.append((phase, uids, lens))
    d = prefix_digests(iter(steps))  # 可迭代对象就行，不一定是列表
    raw = b""
    for i, (phase, uids, lens) in enumerate(steps):
        raw += (f"{phase}|{','.join(map(str, uids))}|{','.join(map(str, lens))};").encode()
        assert same(d[i], hashlib.sha256(raw).hexdigest()), f"第 {i} 步之后的摘要不对"
    assert same(prefix_digests([]), [])


def test_digests_stay_different_after_divergence():
    a = [("prefill", [0], [5])] + [("decode", [0], [1])] * 20
    b = [("prefill", [0], [5]), ("decode", [], [])] + [("decode", [0], [1])] * 19
    da, db = prefix_digests(a), prefix_digests(b)
    assert same(da[0], db[0])
    assert all(x != y for x, y in zip(da[1:], db[1:]))
    assert same(first_divergence(da, db), 1)


def _digests(n, seed):
    rng = random.Random(seed)
    return [f"{rng.getrandbits(64):016x}" for _ in range(n)]


def test_every_divergence_position_and_both_orders():
    for n in [1, 2, 3, 7, 8, 33]:
        base = _digests(n, n)
        for k in range(n):
            other = base[:k] + _digests(n - k, 1000 + k)  # 从 k 起全部不同
            assert same(first_divergence(base, other), k)
            assert same(first_divergence(other, base), k)
        assert first_divergence(base, list(base)) is None


def test_different_lengths():
    base = _digests(10, 1)
    assert same(first_divergence(base, base[:4]), 4)
    assert same(first_divergence(base[:4], base), 4)
    assert same(first_divergence([], base), 0)
    assert same(first_divergence(base, []), 0)
    assert first_divergence([], []) is None
    # 较短的一方在中途就已经分歧：返回分歧处，而不是较短的长度
    other = base[:3] + _digests(3, 2)
    assert same(first_divergence(base, other), 3)


def test_binary_search_access_count():
    n = 100_000
    base = _digests(n, 7)
    for k in [0, 1, n // 3, n - 2, n - 1]:
        other = base[:k] + _digests(n - k, 9)
        counter = [0]
        assert same(first_divergence(Counted(base, counter), Counted(other, counter)), k)
        assert counter[0] <= _limit(n), f"分歧在 {k}：访问了 {counter[0]} 次，上限 {_limit(n)}"
    counter = [0]
    assert first_divergence(Counted(base, counter), Counted(base, counter)) is None
    assert counter[0] <= _limit(n)
    counter = [0]
    assert same(first_divergence(Counted(base, counter), Counted(base[:500], counter)), 500)
    assert counter[0] <= _limit(500)
