"""044 的可见测试：题面里的示例。"""

from solution import check_request, error_body


def _param(raw):
    status, body = check_request(raw)
    assert status == 400, (status, body)
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]
    return body["error"]["param"]


def test_error_body_shape():
    assert error_body("bad", "n") == {
        "error": {"message": "bad", "type": "invalid_request_error", "param": "n", "code": None}
    }
    assert error_body("bad")["error"]["param"] is None


def test_valid_prompt_request():
    assert check_request(b'{"model": "m", "prompt": "hi", "max_tokens": 8}') == (
        200,
        {"text": "hi", "max_tokens": 8, "temperature": 1.0, "top_p": 1.0, "stream": False},
    )


def test_examples_from_the_statement():
    status, body = check_request(b'{"model": "m"}')
    assert status == 400 and body["error"]["param"] is None
    assert _param(b'{"messages": [{"role": "robot", "content": "hi"}]}') == "messages.0.role"
    assert _param(b'{"prompt": "hi", "max_tokens": true}') == "max_tokens"
    assert check_request(b'{"prompt": "hi",')[0] == 400
