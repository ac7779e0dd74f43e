"""039 的隐藏测试：危险的文本、任意切开的字节、role 只在第一块、finish_reason、SSE 的细节。"""

import json
import random

from solution import SSEReader, chat_stream, collect


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


NASTY = ["第一段\n\n第二段", ' "quoted" ', "back\\slash", "data: [DONE]\n\n", "😀", "\r\n", "{}"]


def parse(frames):
    out = []
    for f in frames:
        assert f.startswith(b"data: ") and f.endswith(b"\n\n")
        body = f[len(b"data: ") : -2]
        assert b"\n" not in body  # 一个事件只有一行：内容里的换行被 JSON 转义了
        out.append(body.decode())
    return out


def test_nasty_text_survives_framing():
    replies = [(t, False) for t in NASTY] + [("end", True)]
    frames = list(chat_stream(3, replies, finish_reason="length"))
    payloads = parse(frames)
    assert same(payloads[-1], "[DONE]")
    chunks = [json.loads(p) for p in payloads[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert same(text, "".join(NASTY) + "end")
    assert same(chunks[-1]["choices"][0], {"index": 0, "delta": {}, "finish_reason": "length"})


def test_role_only_first_and_no_empty_chunks():
    replies = [("", False), ("", False), ("a", False), ("", False), ("b", True)]
    chunks = [json.loads(p) for p in parse(chat_stream(1, replies))[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert same(deltas, [{"role": "assistant"}, {"content": "a"}, {"content": "b"}, {}])
    reasons = [c["choices"][0]["finish_reason"] for c in chunks]
    assert same(reasons, [None, None, None, "stop"])


def test_only_an_empty_finished_reply():
    frames = list(chat_stream(9, [("", True)]))
    chunks = [json.loads(p) for p in parse(frames)[:-1]]
    assert same([c["choices"][0]["delta"] for c in chunks], [{"role": "assistant"}, {}])
    assert same(frames[-1], b"data: [DONE]\n\n")


def test_replies_after_finished_are_ignored_and_exhaustion_ends():
    frames = list(chat_stream(2, iter([("x", True), ("y", False), ("z", True)])))
    assert same(collect(frames), ("x", "stop"))
    assert same(len(frames), 3)
    frames = list(chat_stream(2, iter([("x", False)])))  # 没有 finished 就用完了
    assert same(collect(frames), ("x", "stop"))
    assert same(frames[-1], b"data: [DONE]\n\n")
    frames = list(chat_stream(2, []))
    assert same(
        [json.loads(p)["choices"][0]["delta"] for p in parse(frames)[:-1]],
        [
            {"role": "assistant"},
            {},
        ],
    )


def test_random_splits_round_trip():
    rng = random.Random(0)
    for _ in range(40):
        words = NASTY + ["你好", "世界", "x"]
        replies = [(rng.choice(words), False) for _ in range(rng.randint(0, 8))]
        replies.append((rng.choice(["", "完"]), True))
        body = b"".join(chat_stream(rng.randint(0, 99), replies, finish_reason="stop"))
        cuts = sorted(rng.sample(range(1, len(body)), rng.randint(0, min(30, len(body) - 1))))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
        assert same(collect(pieces), ("".join(t for t, _ in replies), "stop"))


def test_one_byte_at_a_time_inside_characters():
    body = b"".join(chat_stream(0, [("汉字😀", True)]))
    reader = SSEReader()
    events = []
    for i in range(len(body)):
        events += reader.feed(body[i : i + 1])
    assert same(events[-1], "[DONE]")
    assert same(json.loads(events[0])["choices"][0]["delta"]["content"], "汉字😀")


def test_reader_details():
    r = SSEReader()
    assert same(r.feed(b": keep-alive comment\n\n"), [])  # 只有注释：没有事件
    assert same(r.feed(b"event: message\nid: 3\ndata:no-space\r\n\r\n"), ["no-space"])
    assert same(r.feed(b"data:  two spaces\n\n"), [" two spaces"])  # 只去掉一个空格
    assert same(r.feed(b"data\n\n"), [""])  # 有 data 行、值为空：一个空事件
    assert same(r.feed(b"data: x\n"), [])  # 还没有空行：事件没完成
    assert same(r.feed(b"data: y"), [])
    assert same(r.feed(b"\r"), [])
    assert same(r.feed(b"\n\n"), ["x\ny"])
    assert same(r.feed(b"data: a: b\n\n"), ["a: b"])  # 只按第一个冒号分


def test_collect_stops_at_done():
    body = b"".join(chat_stream(0, [("a", True)])) + b"data: {not json\n\n"
    assert same(collect([body]), ("a", "stop"))
