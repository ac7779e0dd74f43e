"""049 的可见测试：题面里的示例。"""

from solution import Reply, respond

REPLIES = [
    Reply("你", False, prompt_tokens=5, completion_tokens=1),
    Reply("好", False, prompt_tokens=5, completion_tokens=2),
    Reply("", True, "stop", prompt_tokens=5, completion_tokens=3),
]


def test_text_non_stream():
    assert respond(7, REPLIES, kind="text", stream=False) == (
        200,
        {
            "id": "cmpl-7",
            "object": "text_completion",
            "model": "m",
            "choices": [{"index": 0, "text": "你好", "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        },
    )


def test_chat_stream_with_usage_shape():
    status, events = respond(7, REPLIES, kind="chat", stream=True, include_usage=True)
    assert status == 200 and len(events) == 6 and events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert events[3]["choices"][0]["finish_reason"] == "stop"
    assert events[4]["choices"] == [] and events[4]["usage"]["total_tokens"] == 8


def test_rejected_stream_gets_400():
    rejected = [Reply("", True, "error", error="the prompt has 9000 tokens", prompt_tokens=9000)]
    assert respond(8, rejected, kind="chat", stream=True) == (
        400,
        {
            "error": {
                "message": "the prompt has 9000 tokens",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
    )
