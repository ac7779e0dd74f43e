"""049 的隐藏测试：完整的流式事件、text 接口、空文本的回复、累计计数、499、400、参数检查。"""

from solution import Reply, respond


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


REPLIES = [
    Reply("你", False, prompt_tokens=5, completion_tokens=1),
    Reply("好", False, prompt_tokens=5, completion_tokens=2),
    Reply("", True, "stop", prompt_tokens=5, completion_tokens=3),
]
USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


def raises(func, *args, **kwargs):
    try:
        func(*args, **kwargs)
    except ValueError:
        return True
    return False


def chat(choices, usage="absent"):
    chunk = {
        "id": "chatcmpl-7",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": choices,
    }
    if usage != "absent":
        chunk["usage"] = usage
    return chunk


def test_chat_stream_with_usage_exact():
    status, events = respond(7, REPLIES, kind="chat", stream=True, include_usage=True)
    assert same(status, 200)
    assert same(
        events,
        [
            chat(
                [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
                None,
            ),
            chat([{"index": 0, "delta": {"content": "你"}, "finish_reason": None}], None),
            chat([{"index": 0, "delta": {"content": "好"}, "finish_reason": None}], None),
            chat([{"index": 0, "delta": {}, "finish_reason": "stop"}], None),
            chat([], USAGE),
            "[DONE]",
        ],
    )


def test_chat_stream_without_usage_has_no_usage_key():
    status, events = respond(7, REPLIES, kind="chat", stream=True)
    assert same(status, 200)
    assert same(
        events,
        [
            chat(
                [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
            ),
            chat([{"index": 0, "delta": {"content": "你"}, "finish_reason": None}]),
            chat([{"index": 0, "delta": {"content": "好"}, "finish_reason": None}]),
            chat([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
            "[DONE]",
        ],
    )


def test_chat_non_stream():
    status, body = respond(3, REPLIES, kind="chat", stream=False, model="tiny")
    assert same(status, 200)
    assert same(
        body,
        {
            "id": "chatcmpl-3",
            "object": "chat.completion",
            "model": "tiny",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "你好"},
                    "finish_reason": "stop",
                }
            ],
            "usage": USAGE,
        },
    )


def test_text_stream_has_no_role_chunk():
    replies = [
        Reply("a", False, prompt_tokens=2, completion_tokens=1),
        Reply("b", True, "length", prompt_tokens=2, completion_tokens=2),
    ]
    status, events = respond(9, replies, kind="text", stream=True, include_usage=True)
    head = {"id": "cmpl-9", "object": "text_completion", "model": "m"}

    def piece(text, finish):
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}

    assert same(status, 200)
    assert same(
        events,
        [
            {**head, "choices": [piece("a", None)], "usage": None},
            {**head, "choices": [piece("b", None)], "usage": None},
            {**head, "choices": [piece("", "length")], "usage": None},
            {
                **head,
                "choices": [],
                "usage": {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4},
            },
            "[DONE]",
        ],
    )


def test_empty_text_replies_still_count_as_tokens():
    # 第 2、3 个 token 是一个汉字的两半：第 2 条回复没有文字，第 3 条一起吐出
    replies = [
        Reply("x", False, prompt_tokens=4, completion_tokens=1),
        Reply("", False, prompt_tokens=4, completion_tokens=2),
        Reply("字", False, prompt_tokens=4, completion_tokens=3),
        Reply("", True, "stop", prompt_tokens=4, completion_tokens=4),
    ]
    status, body = respond(1, replies, kind="text", stream=False)
    assert same(body["usage"], {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8})
    assert same(body["choices"][0]["text"], "x字")
    status, events = respond(1, replies, kind="text", stream=True, include_usage=True)
    texts = [e["choices"][0]["text"] for e in events[:-2]]
    assert same(texts, ["x", "字", ""])
    assert same(events[-2]["usage"]["completion_tokens"], 4)


def test_usage_is_not_a_sum_of_replies():
    replies = [
        Reply(c, False, prompt_tokens=3, completion_tokens=i + 1) for i, c in enumerate("abc")
    ]
    replies.append(Reply("d", True, "length", prompt_tokens=3, completion_tokens=4))
    _, body = respond(2, replies, kind="chat", stream=False)
    assert same(body["usage"], {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
    assert same(body["choices"][0]["finish_reason"], "length")


def test_single_reply_request():
    replies = [
        Reply("", True, "stop", prompt_tokens=6, completion_tokens=1)
    ]  # 第一个 token 就是 eos
    status, events = respond(4, replies, kind="chat", stream=True, include_usage=True)
    assert status == 200 and len(events) == 4
    assert same(events[1]["choices"], [{"index": 0, "delta": {}, "finish_reason": "stop"}])
    assert same(events[2]["usage"], {"prompt_tokens": 6, "completion_tokens": 1, "total_tokens": 7})


def test_error_first_reply_is_400_for_every_shape():
    rejected = [Reply("", True, "error", prompt_tokens=9000)]
    for kind in ("chat", "text"):
        for stream, include in ((False, False), (True, False), (True, True)):
            status, body = respond(5, rejected, kind=kind, stream=stream, include_usage=include)
            assert same(status, 400)
            assert same(body["error"]["message"], "the request was rejected")
            assert same(body["error"]["type"], "invalid_request_error")


def test_no_reply_is_499():
    for stream in (False, True):
        status, body = respond(6, [], kind="chat", stream=stream)
        assert same(status, 499)
        assert same(body["error"]["message"], "the client closed the connection")


def test_bad_arguments():
    assert raises(respond, 1, REPLIES, kind="edit", stream=False)
    assert raises(respond, 1, REPLIES, kind="chat", stream=False, include_usage=True)
    assert not raises(respond, 1, REPLIES, kind="text", stream=True, include_usage=True)
