"""043 的可见测试。"""

import hashlib

from solution import encode_step, first_divergence, prefix_digests

STEPS0 = [("prefill", [0, 1], [4, 5]), ("decode", [0, 1], [1, 1]), ("decode", [0, 1], [1, 1])]
STEPS1 = [("prefill", [0, 1], [4, 5]), ("decode", [0], [1]), ("decode", [0, 1], [1, 1])]


def test_encode_examples():
    assert encode_step("prefill", [0, 1], [5, 4]) == b"prefill|0,1|5,4;"
    assert encode_step("decode", [7], [1]) == b"decode|7|1;"
    assert encode_step("decode", [], []) == b"decode||;"


def test_prefix_digests_are_running_sha256():
    d = prefix_digests(STEPS0)
    assert len(d) == 3
    assert d[0] == hashlib.sha256(b"prefill|0,1|4,5;").hexdigest()
    assert d[1] == hashlib.sha256(b"prefill|0,1|4,5;decode|0,1|1,1;").hexdigest()


def test_example():
    d0, d1 = prefix_digests(STEPS0), prefix_digests(STEPS1)
    assert d0[0] == d1[0] and d1[2] != d0[2]
    assert first_divergence(d0, d1) == 1
    assert first_divergence(d0, d0[:2]) == 2
    assert first_divergence(d0, d0) is None
