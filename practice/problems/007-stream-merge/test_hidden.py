"""007 的隐藏测试：拿到就交出、bias 和专家、已经合并过的名字、缺的成员。"""

from solution import merge_stream


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


def _error_message(items):
    try:
        result = list(merge_stream(items))
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"应当抛出 ValueError，实际得到 {result!r}")


def _layer(i, order="qkvgu"):
    names = {
        "q": f"model.layers.{i}.self_attn.q_proj.weight",
        "k": f"model.layers.{i}.self_attn.k_proj.weight",
        "v": f"model.layers.{i}.self_attn.v_proj.weight",
        "g": f"model.layers.{i}.mlp.gate_proj.weight",
        "u": f"model.layers.{i}.mlp.up_proj.weight",
    }
    return [(names[c], [f"{c}{i}"]) for c in order]


def test_yields_as_soon_as_complete():
    items = [("embed", ["e"])] + _layer(0, "kqgvu") + [("norm", ["n"])] + _layer(1, "vkuqg")
    consumed = []

    def source():
        for n, item in enumerate(items, 1):
            consumed.append(n)
            yield item

    seen = []
    for name, _ in merge_stream(source()):
        seen.append((name, len(consumed)))
    assert same(
        seen,
        [
            ("embed", 1),
            ("model.layers.0.self_attn.qkv_proj.weight", 5),
            ("model.layers.0.mlp.gate_up_proj.weight", 6),
            ("norm", 7),
            ("model.layers.1.self_attn.qkv_proj.weight", 11),
            ("model.layers.1.mlp.gate_up_proj.weight", 12),
        ],
    ), f"（名字, 交出它时已经读了几项）：{seen}"


def test_order_inside_a_group_ignores_arrival():
    for order in ["qkv", "qvk", "kqv", "kvq", "vqk", "vkq"]:
        out = dict(merge_stream(_layer(3, order)))
        assert same(out, {"model.layers.3.self_attn.qkv_proj.weight": ["q3", "k3", "v3"]}), order


def test_rows_are_concatenated():
    items = [
        ("x.gate_proj.weight", [[1, 2], [3, 4]]),
        ("x.up_proj.weight", [[5, 6]]),
    ]
    assert same(list(merge_stream(items)), [("x.gate_up_proj.weight", [[1, 2], [3, 4], [5, 6]])])


def test_bias_and_experts_form_their_own_groups():
    items = [
        ("a.q_proj.bias", ["qb"]),
        ("a.q_proj.weight", ["qw"]),
        ("a.k_proj.bias", ["kb"]),
        ("a.v_proj.bias", ["vb"]),
        ("mlp.experts.3.up_proj.weight", ["u3"]),
        ("mlp.experts.10.gate_proj.weight", ["g10"]),
        ("mlp.experts.3.gate_proj.weight", ["g3"]),
        ("mlp.experts.10.up_proj.weight", ["u10"]),
        ("a.k_proj.weight", ["kw"]),
        ("a.v_proj.weight", ["vw"]),
    ]
    assert same(
        list(merge_stream(items)),
        [
            ("a.qkv_proj.bias", ["qb", "kb", "vb"]),
            ("mlp.experts.3.gate_up_proj.weight", ["g3", "u3"]),
            ("mlp.experts.10.gate_up_proj.weight", ["g10", "u10"]),
            ("a.qkv_proj.weight", ["qw", "kw", "vw"]),
        ],
    )


def test_already_merged_names_pass_through():
    items = [
        ("a.qkv_proj.weight", ["qkv"]),
        ("a.gate_up_proj.weight", ["gu"]),
        ("a.o_proj.weight", ["o"]),
        ("a.down_proj.weight", ["d"]),
        ("a.q_norm.weight", ["qn"]),
    ]
    assert same(list(merge_stream(items)), items)


def test_missing_members_are_named():
    items = _layer(0) + _layer(1, "qkg")
    message = _error_message(items)
    assert "model.layers.1.self_attn.v_proj.weight" in message, message
    assert "model.layers.1.mlp.up_proj.weight" in message, message
    assert "model.layers.0" not in message, message


def test_duplicate_after_group_completed_is_a_new_group():
    # 一组交出以后从缓冲区里删掉；同名的成员再来，是新的一组（最后因为没凑齐而报错）
    items = _layer(0, "qkv") + [("model.layers.0.self_attn.q_proj.weight", ["again"])]
    message = _error_message(items)
    assert "model.layers.0.self_attn.k_proj.weight" in message, message


def test_duplicate_in_pending_group():
    items = [("a.up_proj.weight", [1]), ("b.up_proj.weight", [2]), ("a.up_proj.weight", [3])]
    message = _error_message(items)
    assert "a.up_proj.weight" in message, message


def test_empty():
    assert same(list(merge_stream([])), [])
