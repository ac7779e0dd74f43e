"""009 的可见测试。"""

from solution import Op, OpList, Param, StateDictError


class Norm(Op):
    def __init__(self):
        self.weight = Param((4,))
        self.eps = 1e-6


class Block(Op):
    def __init__(self):
        self.norm = Norm()
        self.proj = Param((4, 4))
        self._cache = Param((9,))


class Model(Op):
    def __init__(self):
        self.layers = OpList([Block(), Block()])
        self.head = Param((2, 4))


def _problems(model, state):
    try:
        model.load_state_dict(state)
    except StateDictError as exc:
        return exc.problems
    raise AssertionError("应当抛出 StateDictError")


def test_names():
    assert list(Model().state_dict()) == [
        "layers.0.norm.weight",
        "layers.0.proj",
        "layers.1.norm.weight",
        "layers.1.proj",
        "head",
    ]
    assert list(Norm().state_dict("model.norm")) == ["model.norm.weight"]


def test_load_replaces():
    m = Model()
    state = {k: Param(v.shape, v.dtype) for k, v in m.state_dict().items()}
    m.load_state_dict(state)
    assert m.head is state["head"]
    assert m.layers[1].norm.weight is state["layers.1.norm.weight"]


def test_example_problems():
    m = Model()
    state = m.state_dict()
    del state["head"]
    state["layers.2.proj"] = Param((4, 4))
    state["layers.0.proj"] = Param((4, 2))
    assert _problems(m, state) == [
        "missing: head",
        "unexpected: layers.2.proj",
        "shape: layers.0.proj expected (4, 4) got (4, 2)",
    ]
