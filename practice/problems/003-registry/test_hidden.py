"""003 的隐藏测试：表之间互相独立、排序、重复登记后的状态等。"""

from solution import Registry


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


def _error_message(func, *args):
    """调用 func，要求它抛 ValueError，返回错误信息。"""
    try:
        value = func(*args)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"应当抛出 ValueError，实际返回了 {value!r}")


def test_registries_are_independent():
    first = Registry("注意力后端")
    second = Registry("MoE 后端")
    first.register("fused")("first")
    second.register("fused")("second")  # 另一张表里同名：不应报重复
    assert same(first.get("fused"), "first")
    assert same(second.get("fused"), "second")
    assert "fused" not in Registry("空表")


def test_unknown_lists_names_sorted():
    backends = Registry("注意力后端")
    for name in ["trtllm", "fa", "fi"]:
        backends.register(name)(name.upper())
    message = _error_message(backends.get, "flashinfer")
    assert "fa, fi, trtllm" in message, f"支持的名字应按字母序列出：{message!r}"
    assert same(backends.names(), ["fa", "fi", "trtllm"])


def test_messages_mention_kind():
    caches = Registry("缓存管理器")
    caches.register("radix")(1)
    assert "缓存管理器" in _error_message(caches.get, "lru")
    assert "缓存管理器" in _error_message(caches.register("radix"), 2)


def test_unknown_on_empty_registry():
    empty = Registry("调度策略")
    message = _error_message(empty.get, "fcfs")
    assert "调度策略" in message and "fcfs" in message, message


def test_duplicate_keeps_first():
    kinds = Registry("分词器")
    kinds.register("hf")("first")
    _error_message(kinds.register("hf"), "second")
    assert same(kinds.get("hf"), "first")
    assert same(kinds.names(), ["hf"])


def test_same_object_under_two_names():
    layers = Registry("层")

    def impl():
        return 42

    assert layers.register("a")(impl) is impl
    assert layers.register("b")(impl) is impl
    assert layers.get("a") is layers.get("b") is impl


def test_any_object_and_falsy_values():
    consts = Registry("常量")
    consts.register("zero")(0)
    consts.register("none")(None)
    assert same(consts.get("zero"), 0)
    assert consts.get("none") is None
    assert "none" in consts


def test_names_are_case_sensitive():
    backends = Registry("注意力后端")
    backends.register("fa")(1)
    assert "FA" not in backends
    _error_message(backends.get, "FA")
    backends.register("FA")(2)
    assert same(backends.get("FA"), 2)
    assert same(backends.names(), ["FA", "fa"])


def test_names_is_a_copy():
    samplers = Registry("采样器")
    samplers.register("greedy")(1)
    samplers.names().append("hacked")
    assert same(samplers.names(), ["greedy"])


def test_non_ascii_names_are_ordinary_names():
    # 名字原样比较：中文名、全角字母都是普通的名字，全角的 ｆａ 和半角的 fa 是两个条目
    table = Registry("注意力后端")
    table.register("ｆａ")("fullwidth")
    table.register("fa")("ascii")
    table.register("闪电")("cn")
    assert same(table.get("ｆａ"), "fullwidth")
    assert same(table.get("fa"), "ascii")
    assert same(table.get("闪电"), "cn")
    assert same(table.names(), sorted(["ｆａ", "fa", "闪电"]))
    assert "闪电" in _error_message(table.get, "雷电")
