"""003 的可见测试。"""

from solution import Registry


def _error_message(func, *args):
    """调用 func，要求它抛 ValueError，返回错误信息。"""
    try:
        value = func(*args)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"应当抛出 ValueError，实际返回了 {value!r}")


def test_register_and_get():
    acts = Registry("激活函数")

    @acts.register("silu")
    def silu(x):
        return x

    assert acts.get("silu") is silu
    assert silu(3) == 3, "装饰器应当原样返回被装饰的函数"


def test_register_class():
    models = Registry("模型")

    @models.register("llama")
    class Llama:
        pass

    assert models.get("llama") is Llama
    assert Llama.__name__ == "Llama"


def test_duplicate_rejected():
    caches = Registry("缓存管理器")
    caches.register("naive")(object())
    message = _error_message(caches.register("naive"), object())
    assert "naive" in message, f"错误信息应包含重复的名字：{message!r}"


def test_unknown_name_lists_supported():
    backends = Registry("注意力后端")
    backends.register("fa")("FA")
    backends.register("fi")("FI")
    message = _error_message(backends.get, "flash")
    assert "flash" in message, message
    assert "fa, fi" in message, f"错误信息应列出支持的名字 fa, fi：{message!r}"


def test_names_and_contains():
    samplers = Registry("采样器")
    samplers.register("greedy")(1)
    samplers.register("top_k")(2)
    assert samplers.names() == ["greedy", "top_k"]
    assert "greedy" in samplers
    assert "top_p" not in samplers
