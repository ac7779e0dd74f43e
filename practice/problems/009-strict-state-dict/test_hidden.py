"""009 的隐藏测试：顺序、dtype、原子性、不改调用方的字典、普通列表报错。"""

from solution import Op, OpList, Param, StateDictError


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


class Norm(Op):
    def __init__(self):
        self.weight = Param((4,))
        self.bias = None


class Block(Op):
    def __init__(self):
        self.norm = Norm()
        self.proj = Param((4, 4))
        self._cache = Param((9,))


class Model(Op):
    def __init__(self, n=2):
        self.layers = OpList([Block() for _ in range(n)])
        self.head = Param((2, 4))


def _fresh(m):
    return {k: Param(v.shape, v.dtype) for k, v in m.state_dict().items()}


def _problems(model, state):
    try:
        model.load_state_dict(state)
    except StateDictError as exc:
        return exc.problems
    raise AssertionError("应当抛出 StateDictError")


def test_all_problem_kinds_in_order():
    m = Model(3)
    state = _fresh(m)
    del state["layers.1.proj"]
    del state["layers.0.norm.weight"]
    state["zz"] = Param((1,))
    state["aa.weight"] = Param((1,))
    state["head"] = Param((2, 4), "bfloat16")
    state["layers.2.proj"] = Param((4,))
    assert same(
        _problems(m, state),
        [
            "missing: layers.0.norm.weight",
            "missing: layers.1.proj",
            "unexpected: aa.weight",
            "unexpected: zz",
            "shape: layers.2.proj expected (4, 4) got (4,)",
            "dtype: head expected float32 got bfloat16",
        ],
    )


def test_shape_checked_before_dtype():
    m = Model(1)
    state = _fresh(m)
    state["head"] = Param((4, 2), "float16")
    assert same(_problems(m, state), ["shape: head expected (2, 4) got (4, 2)"])


def test_failed_load_changes_nothing():
    m = Model()
    good = _fresh(m)
    m.load_state_dict(good)
    bad = _fresh(m)
    bad["head"] = Param((3, 3))
    _problems(m, bad)
    for name, p in m.state_dict().items():
        assert p is good[name], f"加载失败了，{name} 却被换掉了"


def test_callers_dict_is_untouched():
    m = Model()
    state = _fresh(m)
    before = dict(state)
    m.load_state_dict(state)
    assert state == before and list(state) == list(before)
    bad = dict(before)
    bad["extra"] = Param((1,))
    _problems(m, bad)
    assert "extra" in bad and len(bad) == len(before) + 1


def test_plain_list_is_a_type_error():
    class Wrong(Op):
        def __init__(self):
            self.layers = [Norm(), Norm()]

    try:
        Wrong().state_dict()
    except TypeError:
        pass
    else:
        raise AssertionError("普通列表里放了层，应当抛出 TypeError")


def test_plain_list_of_numbers_is_fine():
    class Ok(Op):
        def __init__(self):
            self.sizes = [1, 2, 3]
            self.w = Param((3,))

    assert same(list(Ok().state_dict()), ["w"])


def test_nested_oplist_and_prefix():
    class Outer(Op):
        def __init__(self):
            self.blocks = OpList([OpList([Norm()]), OpList([Norm(), Norm()])])

    assert same(
        list(Outer().state_dict("m")),
        [
            "m.blocks.0.0.weight",
            "m.blocks.1.0.weight",
            "m.blocks.1.1.weight",
        ],
    )
    assert same(len(Outer().blocks), 2)
