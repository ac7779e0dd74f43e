"""044 的隐藏测试：检查的顺序与 param、布尔值不是数字、NaN、规范化的输出、任何输入都不抛异常。"""

import json

from solution import check_request


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


def _err(raw):
    status, body = check_request(raw)
    assert same(status, 400), (status, body)
    err = body["error"]
    assert same(set(err), {"message", "type", "param", "code"})
    assert err["type"] == "invalid_request_error" and err["code"] is None
    assert isinstance(err["message"], str) and err["message"]
    if err["param"] is not None:
        assert err["param"] in err["message"], err
    return err["param"]


def _j(obj):
    return json.dumps(obj).encode()


def test_not_json_or_not_an_object():
    for raw in [b"", b"not json", b'{"prompt": "a"', b"\xff\xfe{}", b'"a string"', b"[1, 2]", b"3"]:
        assert _err(raw) is None, raw


def test_messages_and_prompt_exactly_one():
    assert _err(_j({})) is None
    assert _err(_j({"messages": None, "prompt": None})) is None
    both = {"prompt": "a", "messages": [{"role": "user", "content": "b"}]}
    assert _err(_j(both)) is None
    # null 算没给：只剩一个，是合法的
    ok = check_request(_j({"prompt": "a", "messages": None}))
    assert ok[0] == 200 and ok[1]["text"] == "a"


def test_message_params():
    assert same(_err(_j({"messages": []})), "messages")
    assert same(_err(_j({"messages": "hi"})), "messages")
    assert same(_err(_j({"messages": {"role": "user"}})), "messages")
    assert same(_err(_j({"messages": [{"role": "user", "content": "a"}, "b"]})), "messages.1")
    assert same(_err(_j({"messages": [{"content": "a"}]})), "messages.0.role")
    assert same(_err(_j({"messages": [{"role": ["user"], "content": "a"}]})), "messages.0.role")
    bad_content = {"messages": [{"role": "system", "content": "a"}, {"role": "user"}]}
    assert same(_err(_j(bad_content)), "messages.1.content")
    assert same(_err(_j({"messages": [{"role": "user", "content": 5}]})), "messages.0.content")


def test_prompt_must_be_non_empty_string():
    assert same(_err(_j({"prompt": ""})), "prompt")
    assert same(_err(_j({"prompt": 5})), "prompt")
    assert same(_err(_j({"prompt": ["a"]})), "prompt")


def test_numbers_and_booleans():
    base = {"prompt": "hi"}
    for value in [0, -1, 1.5, "8", True, False, [1]]:
        assert same(_err(_j({**base, "max_tokens": value})), "max_tokens"), value
    for value in [-0.1, 2.5, "1", True, None]:
        assert same(_err(_j({**base, "temperature": value})), "temperature"), value
    assert same(_err(b'{"prompt": "hi", "temperature": NaN}'), "temperature")
    assert same(_err(b'{"prompt": "hi", "top_p": Infinity}'), "top_p")
    for value in [0, -1, 1.01, False]:
        assert same(_err(_j({**base, "top_p": value})), "top_p"), value
    for value in [2, 0, True, 1.0, "1"]:
        assert same(_err(_j({**base, "n": value})), "n"), value
    for value in [1, "true", None]:
        assert same(_err(_j({**base, "stream": value})), "stream"), value


def test_first_problem_wins():
    both_bad = {"messages": [], "max_tokens": 0, "n": 3}
    assert same(_err(_j(both_bad)), "messages")
    later = {"prompt": "hi", "max_tokens": 0, "temperature": 9, "n": 3}
    assert same(_err(_j(later)), "max_tokens")
    assert same(_err(_j({"prompt": "hi", "temperature": 9, "top_p": 0})), "temperature")
    assert same(_err(_j({"prompt": "hi", "n": 3, "stream": "yes"})), "n")


def test_normalized_output():
    msgs = [
        {"role": "system", "content": "be brief", "name": "x"},
        {"role": "user", "content": "你好"},
        {"role": "assistant", "content": ""},
    ]
    body = {
        "model": "m",
        "messages": msgs,
        "temperature": 0,
        "top_p": 0.5,
        "stream": True,
        "max_tokens": None,
        "user": "u",
        "n": 1,
    }
    status, req = check_request(_j(body))
    assert same(status, 200)
    assert same(
        req,
        {
            "text": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "你好"},
                {"role": "assistant", "content": ""},
            ],
            "max_tokens": None,
            "temperature": 0.0,
            "top_p": 0.5,
            "stream": True,
        },
    )
    assert isinstance(req["temperature"], float)
    assert same(msgs[0], {"role": "system", "content": "be brief", "name": "x"})  # 输入没被改动
    assert same(check_request(_j({"prompt": "x", "temperature": 2, "top_p": 1}))[0], 200)


def test_never_raises():
    samples = [
        b"null",
        b"{}",
        b'{"messages": [null]}',
        b'{"messages": [[]]}',
        b'{"messages": [{"role": null, "content": null}]}',
        b'{"prompt": {"a": 1}}',
        b'{"prompt": "a", "max_tokens": 1e400}',
        b'{"prompt": "a", "temperature": {}}',
        b"\x00\x01",
        '{"prompt": "\u4f60\u597d"}'.encode("utf-16"),
    ]
    for raw in samples:
        status, body = check_request(raw)
        assert status in (200, 400), raw
