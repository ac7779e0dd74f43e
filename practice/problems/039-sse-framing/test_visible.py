"""039 的可见测试。"""

import json

from solution import SSEReader, chat_stream, collect


def test_example_frames():
    frames = list(chat_stream(7, [("你", False), ("", False), ("好", True)]))
    assert len(frames) == 4
    assert frames[-1] == b"data: [DONE]\n\n"
    for f in frames:
        assert f.startswith(b"data: ") and f.endswith(b"\n\n")
    chunks = [json.loads(f[6:].decode()) for f in frames[:3]]
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "content": "你"},
        {"content": "好"},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "stop"]
    assert all(c["id"] == "chatcmpl-7" for c in chunks)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_reader_example():
    r = SSEReader()
    assert r.feed(b"data: a\n\nda") == ["a"]
    assert r.feed(b"ta: b\ndata: c\n\n") == ["b\nc"]


def test_collect_example():
    body = b"".join(chat_stream(7, [("你", False), ("", False), ("好", True)]))
    assert collect([body[i : i + 5] for i in range(0, len(body), 5)]) == ("你好", "stop")
