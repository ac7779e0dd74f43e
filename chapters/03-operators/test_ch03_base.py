"""第 3 章：BaseOP 的状态字典——带点的名字、严格加载、出错时不留下加载了一半的层。"""

from __future__ import annotations

import pytest
import torch

from minisgl.layers import BaseOP, LinearReplicated, OPList, RMSNorm, StateDictError


class Block(BaseOP):
    def __init__(self) -> None:
        self.proj = LinearReplicated(4, 3, bias=True)
        self.norm = RMSNorm(3, eps=1e-6)
        self.scale = torch.empty(3)
        self.eps = 1e-6  # 不是张量：不算状态
        self._cache = torch.zeros(5)  # 下划线开头：不算状态

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x)) * self.scale


class Model(BaseOP):
    def __init__(self, n: int) -> None:
        self.layers = OPList([Block() for _ in range(n)])
        self.head = LinearReplicated(3, 2)  # 没有 bias：bias 是 None，不进状态字典


def random_state(model: BaseOP, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    return {k: torch.randn(v.shape, dtype=dtype) for k, v in model.state_dict().items()}


def test_state_dict_names_are_dotted_and_ordered() -> None:
    model = Model(2)
    assert list(model.state_dict()) == [
        "layers.0.proj.weight",
        "layers.0.proj.bias",
        "layers.0.norm.weight",
        "layers.0.scale",
        "layers.1.proj.weight",
        "layers.1.proj.bias",
        "layers.1.norm.weight",
        "layers.1.scale",
        "head.weight",
    ]
    assert list(model.state_dict(prefix="model"))[0] == "model.layers.0.proj.weight"
    assert model.state_dict()["head.weight"].shape == (2, 3)


def test_load_replaces_tensors_and_the_forward_uses_them() -> None:
    model = Model(2)
    state = random_state(model)
    model.load_state_dict(state)
    for name, tensor in model.state_dict().items():
        assert tensor is state[name]  # 替换，不拷贝
    block = model.layers[1]
    x = torch.randn(5, 4)
    y = torch.nn.functional.linear(x, state["layers.1.proj.weight"], state["layers.1.proj.bias"])
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6) * state["layers.1.norm.weight"]
    torch.testing.assert_close(block(x), y * state["layers.1.scale"])


def test_load_does_not_touch_the_callers_dict() -> None:
    model = Model(1)
    state = random_state(model)
    before = dict(state)
    model.load_state_dict(state)
    assert state == before


def test_missing_and_unexpected_keys_are_all_reported() -> None:
    model = Model(2)
    state = random_state(model)
    del state["layers.1.norm.weight"]
    del state["head.weight"]
    state["layers.2.proj.weight"] = torch.zeros(3, 4)
    with pytest.raises(StateDictError) as info:
        model.load_state_dict(state)
    message = str(info.value)
    assert "missing keys: layers.1.norm.weight, head.weight" in message
    assert "unexpected keys: layers.2.proj.weight" in message


def test_shape_and_dtype_mismatch_name_the_tensor() -> None:
    model = Model(1)
    state = random_state(model)
    state["layers.0.proj.weight"] = torch.zeros(4, 3)  # 转置了
    state["head.weight"] = state["head.weight"].to(torch.bfloat16)
    with pytest.raises(StateDictError) as info:
        model.load_state_dict(state)
    message = str(info.value)
    assert "layers.0.proj.weight: shape mismatch, expected (3, 4), got (4, 3)" in message
    assert "head.weight: dtype mismatch, expected torch.float32, got torch.bfloat16" in message


def test_failed_load_changes_nothing() -> None:
    model = Model(1)
    good = random_state(model)
    model.load_state_dict(good)
    bad = random_state(model)
    bad["head.weight"] = torch.zeros(7, 7)
    with pytest.raises(StateDictError):
        model.load_state_dict(bad)
    for name, tensor in model.state_dict().items():
        assert tensor is good[name], f"{name} 被替换了，但加载失败了"


def test_a_plain_list_of_layers_is_an_error() -> None:
    class Wrong(BaseOP):
        def __init__(self) -> None:
            self.layers = [RMSNorm(3, 1e-6), RMSNorm(3, 1e-6)]

    with pytest.raises(TypeError, match="OPList"):
        Wrong().state_dict()


def test_build_on_meta_then_load_real_weights() -> None:
    """第 5 章的做法：先在 meta 设备上按目标 dtype 建好结构（不分配内存），再换上真的权重。"""
    with torch.device("meta"):
        model = Model(2)
    assert all(t.is_meta for t in model.state_dict().values())
    state = random_state(model)
    model.load_state_dict(state)
    assert not any(t.is_meta for t in model.state_dict().values())
    x = torch.randn(2, 4)
    assert torch.isfinite(model.layers[0](x)).all()


def test_oplist_iterates_and_indexes() -> None:
    ops = OPList([RMSNorm(2, 1e-6) for _ in range(3)])
    assert len(ops) == 3
    assert list(ops) == [ops[0], ops[1], ops[2]]
    assert list(ops.state_dict()) == ["0.weight", "1.weight", "2.weight"]
