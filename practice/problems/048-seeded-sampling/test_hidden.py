"""048 的隐藏测试：边界、零权重、没归一化的权重、和略小于 1、分布、与批次无关、rng 的用法。"""

import random

from solution import sample_batch, sample_index, seeded_uniform


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


def raises(func, *args):
    try:
        func(*args)
    except ValueError:
        return True
    return False


def u_of(seed, position):
    return random.Random(f"{seed}:{position}").random()


def test_seeded_uniform_unchanged():
    for seed, position in [(0, 0), (7, 3), (123, 4567), (-5, 2)]:
        assert same(seeded_uniform(seed, position), u_of(seed, position))


def test_segments_are_half_open():
    w = [0.25, 0.25, 0.25, 0.25]  # 前缀和 0.25、0.5、0.75、1.0 都是精确的二进制小数
    assert same(
        [sample_index(w, u) for u in (0.0, 0.24, 0.25, 0.49, 0.5, 0.75, 0.99)],
        [
            0,
            0,
            1,
            1,
            2,
            3,
            3,
        ],
    )


def test_zero_weight_tokens_are_never_chosen():
    w = [0.0, 0.0, 0.5, 0.0, 0.5, 0.0]
    for i in range(1000):
        assert sample_index(w, i / 1000) in (2, 4)
    assert same(sample_index(w, 0.0), 2)
    assert same(sample_index(w, 0.5), 4)
    assert same(sample_index([0.0, 0.0, 3.0], 0.0), 2)


def test_unnormalized_weights_are_scaled_by_the_total():
    assert same(sample_index([1, 2, 1], 0.0), 0)
    assert same(sample_index([1, 2, 1], 0.24), 0)
    assert same(sample_index([1, 2, 1], 0.25), 1)
    assert same(sample_index([1, 2, 1], 0.74), 1)
    assert same(sample_index([1, 2, 1], 0.75), 2)
    assert same(sample_index([10.0], 0.999), 0)


def test_probabilities_that_sum_to_slightly_less_than_one():
    w = [0.3, 0.3, 0.3999999, 0.0]
    assert same(sample_index(w, 0.99999999), 2)
    assert same(sample_index(w, 1 - 2**-53), 2)  # 小于 1 的最大的双精度数
    w = [0.1] * 10  # 前缀和的最后一个是 0.9999999999999999
    assert same(sample_index(w, 1 - 2**-53), 9)
    assert same(sample_index(w + [0.0], 0.9999999999999999), 9)


def test_bad_arguments():
    assert raises(sample_index, [], 0.5)
    assert raises(sample_index, [0.0, 0.0], 0.5)
    assert raises(sample_index, [1.0, -0.1], 0.5)
    assert raises(sample_index, [1.0, float("nan")], 0.5)
    assert raises(sample_index, [1.0, float("inf")], 0.5)
    assert raises(sample_index, [1.0], 1.0)
    assert raises(sample_index, [1.0], -0.01)
    assert raises(sample_batch, [[1.0]], [1, 2], [0], random.Random(0))
    assert raises(sample_batch, [[1.0]], [1], [], random.Random(0))


def test_frequencies_follow_the_weights():
    w = [0.1, 0.2, 0.0, 0.3, 0.4]
    n = 20000
    counts = [0] * len(w)
    for k in range(n):
        counts[sample_index(w, u_of(k % 100, k // 100))] += 1
    assert same(counts[2], 0)
    for c, p in zip(counts, w):
        assert abs(c / n - p) < 0.02, (counts, w)


def test_seeded_rows_do_not_depend_on_the_batch():
    rng_data = random.Random(48)
    mine = [rng_data.random() for _ in range(8)]
    for position in range(20):
        alone = sample_batch([mine], [11], [position], random.Random(0))[0]
        for trial in range(10):
            size = rng_data.randint(1, 6)
            where = rng_data.randrange(size)
            rows = [[rng_data.random() for _ in range(8)] for _ in range(size)]
            seeds = [rng_data.choice([None, 1, 2, 11]) for _ in range(size)]
            positions = [rng_data.randrange(50) for _ in range(size)]
            rows[where], seeds[where], positions[where] = mine, 11, position
            got = sample_batch(rows, seeds, positions, random.Random(trial))
            assert same(got[where], alone), (position, size, where)


def test_seeded_rows_use_their_position_not_their_row():
    w = [1.0] * 1000
    got = sample_batch([w, w, w], [5, 5, 5], [0, 0, 9], random.Random(0))
    assert got[0] == got[1] == sample_index(w, u_of(5, 0))
    assert same(got[2], sample_index(w, u_of(5, 9)))


def test_only_unseeded_rows_draw_from_rng():
    w = [1.0] * 1000
    plain = sample_batch([w, w], [None, None], [0, 0], random.Random(3))
    mixed = sample_batch([w, w, w, w], [4, None, 9, None], [1, 0, 2, 0], random.Random(3))
    assert same([mixed[1], mixed[3]], plain)
    first, second = random.Random(3).random(), random.Random(3)
    second.random()
    assert same(plain, [sample_index(w, first), sample_index(w, second.random())])


def test_seed_zero_is_a_seed():
    w = [1.0] * 1000
    got = sample_batch([w], [0], [5], random.Random(1))
    assert same(got, [sample_index(w, u_of(0, 5))])
