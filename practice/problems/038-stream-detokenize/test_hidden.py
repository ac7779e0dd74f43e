"""038 的隐藏测试：各种切法、尽早发出、交错、停止符、-1、中止、非法字节、长流。"""

import codecs
import random

from solution import Detokenizer


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


TEXTS = [
    "Hello, world!\nSecond line.",
    "你好，世界。魑魅魍魉、饕餮。",
    "emoji 😀🫠👨‍👩‍👧 混合 mixed 🦄!",
    "ok",
]


def make_table(rng):
    """单字节 token 0..255，外加一些随机切出来的多字节 token（有的横跨字符）。"""
    table = {i: bytes([i]) for i in range(256)}
    joined = "".join(TEXTS).encode()
    next_id = 1000
    for _ in range(300):
        start = rng.randrange(len(joined))
        piece = joined[start : start + rng.randint(2, 7)]
        if piece not in table.values():
            table[next_id] = piece
            next_id += 1
    table[999] = b""  # 特殊 token
    return table


def split(table, data, rng):
    by_bytes = {}
    for token, raw in table.items():
        by_bytes.setdefault(raw, token)
    ids, i = [], 0
    while i < len(data):
        options = [n for n in range(1, 8) if data[i : i + n] in by_bytes]
        n = rng.choice(options)
        ids.append(by_bytes[data[i : i + n]])
        i += n
    return ids


def expected_prefixes(table, ids):
    """每个 token 之后应当已经发出的全部文本（标准库的增量解码器）。"""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    total, out = "", []
    for t in ids:
        total += dec.decode(table[t])
        out.append(total)
    return out


def test_random_splits_concatenate_and_emit_as_early_as_possible():
    rng = random.Random(1)
    table = make_table(rng)
    for text in TEXTS:
        data = text.encode()
        for _ in range(6):
            ids = split(table, data, rng)
            d = Detokenizer(table, stop_ids=set())
            parts = d.step([(5, t, False) for t in ids]) + d.step([(5, -1, True)])
            assert same("".join(parts), text)
            assert same(parts[-1], "")
            assert not any("\ufffd" in p for p in parts)
            sofar = ""
            for p, want in zip(parts, expected_prefixes(table, ids)):
                sofar += p
                assert same(sofar, want)
            assert same(d.active(), 0)


def test_complete_char_before_a_cut_is_sent_now():
    table = {i: bytes([i]) for i in range(256)}
    table[500] = "好".encode() + "订".encode()[:1]  # 一个完整的字 + 下一个字的第 1 个字节
    d = Detokenizer(table, stop_ids=set())
    assert same(d.step([(0, 500, False)]), ["好"])
    rest = "订".encode()[1:]
    assert same(d.step([(0, rest[0], False), (0, rest[1], False)]), ["", "订"])


def test_special_token_inside_a_character():
    table = {i: bytes([i]) for i in range(256)}
    table[999] = b""
    data = "你".encode()
    d = Detokenizer(table, stop_ids=set())
    msgs = [(0, data[0], False), (0, 999, False), (0, data[1], False), (0, data[2], False)]
    assert same(d.step(msgs), ["", "", "", "你"])


def test_interleaved_requests_are_independent():
    rng = random.Random(7)
    table = make_table(rng)
    streams = {uid: split(table, t.encode(), rng) for uid, t in enumerate(TEXTS)}
    alone = {}
    for uid, ids in streams.items():
        d = Detokenizer(table, stop_ids=set())
        alone[uid] = d.step([(uid, t, i == len(ids) - 1) for i, t in enumerate(ids)])
    msgs, cursor = [], {uid: 0 for uid in streams}
    while any(cursor[u] < len(streams[u]) for u in streams):
        uid = rng.choice([u for u in streams if cursor[u] < len(streams[u])])
        k = cursor[uid]
        msgs.append((uid, streams[uid][k], k == len(streams[uid]) - 1))
        cursor[uid] += 1
    d = Detokenizer(table, stop_ids=set())
    got = {uid: [] for uid in streams}
    i = 0
    while i < len(msgs):
        batch = msgs[i : i + rng.randint(1, 5)]
        for (uid, _, _), text in zip(batch, d.step(batch)):
            got[uid].append(text)
        i += len(batch)
    assert same(got, alone)
    assert same(d.active(), 0)


def test_stop_only_stripped_when_finished():
    table = {i: bytes([i]) for i in range(256)}
    d = Detokenizer(table, stop_ids={ord("!")})
    assert same(
        d.step([(0, ord("!"), False), (0, ord("a"), False), (0, ord("!"), True)]),
        [
            "!",
            "a",
            "",
        ],
    )
    # 结束但最后一个 token 不是停止符（到了长度上限）：照常是文本
    assert same(d.step([(1, ord("b"), False), (1, ord("c"), True)]), ["b", "c"])


def test_finish_mid_character_flushes_replacement():
    table = {i: bytes([i]) for i in range(256)}
    d = Detokenizer(table, stop_ids=set())
    data = "😀".encode()
    assert same(
        d.step([(0, ord("x"), False), (0, data[0], False), (0, data[1], True)]),
        [
            "x",
            "",
            "\ufffd",
        ],
    )
    assert same(d.active(), 0)


def test_no_token_rejected_request():
    d = Detokenizer({i: bytes([i]) for i in range(256)}, stop_ids=set())
    assert same(d.step([(3, -1, True)]), [""])
    assert same(d.active(), 0)


def test_abort_forgets_and_uid_starts_over():
    table = {i: bytes([i]) for i in range(256)}
    d = Detokenizer(table, stop_ids=set())
    data = "好".encode()
    assert same(d.step([(0, data[0], False), (1, ord("a"), False)]), ["", "a"])
    assert same(d.active(), 2)
    d.abort(0)
    d.abort(42)
    assert same(d.active(), 1)
    # uid 0 的旧字节已经丢掉：新请求从头开始
    assert same(d.step([(0, ord("z"), False)]), ["z"])
    assert same(d.step([(0, -1, True), (1, -1, True)]), ["", ""])
    assert same(d.active(), 0)


def test_invalid_bytes_are_not_held_forever():
    """不可能变完整的字节（孤立的后续字节、0xFF）马上按替换字符发出，不用等。"""
    table = {i: bytes([i]) for i in range(256)}
    d = Detokenizer(table, stop_ids=set())
    assert same(d.step([(0, 0x80, False)]), ["\ufffd"])
    assert same(d.step([(0, 0xFF, False)]), ["\ufffd"])
    assert same(d.step([(0, ord("a"), True)]), ["a"])


def test_concatenation_with_invalid_bytes():
    rng = random.Random(3)
    table = {i: bytes([i]) for i in range(256)}
    for _ in range(50):
        data = bytes(
            rng.choice([0x41, 0x80, 0xBF, 0xC3, 0xA9, 0xE4, 0xBD, 0xF0, 0x9F, 0xFF])
            for _ in range(rng.randint(1, 12))
        )
        d = Detokenizer(table, stop_ids=set())
        parts = d.step([(0, b, i == len(data) - 1) for i, b in enumerate(data)])
        assert same("".join(parts), data.decode("utf-8", errors="replace"))


def test_long_stream():
    """一个请求 6 万个 token：每一步只处理结尾几个字节，很快就能跑完。"""
    table = {i: bytes([i]) for i in range(256)}
    data = ("中文和English混排，😀。" * 1500).encode()
    d = Detokenizer(table, stop_ids=set())
    parts = d.step([(0, b, i == len(data) - 1) for i, b in enumerate(data)])
    assert same("".join(parts), data.decode())
    assert same(sum(1 for p in parts if p), len(data.decode()))
