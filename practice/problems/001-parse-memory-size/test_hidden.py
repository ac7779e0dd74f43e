"""001 的隐藏测试：边界情况。"""

from solution import parse_memory_size


def same(actual, expected):
    """类型和取值都一致才算对：type 逐层相同（list/tuple/dict 递归进去），最后才比 ==。

    只比 == 的话，返回 Fraction(1024)、1024.0，或者一个和谁比都相等的对象，也能蒙混过关。
    """
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(expected, dict):
        keys_match = actual.keys() == expected.keys()
        return keys_match and all(same(actual[k], expected[k]) for k in expected)
    return bool(expected == actual)


def _error_message(text):
    """调用 parse_memory_size(text)，要求它抛 ValueError，返回错误信息。"""
    try:
        value = parse_memory_size(text)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"parse_memory_size({text!r}) 应当抛出 ValueError，实际返回了 {value!r}")


def test_lowercase_units():
    assert same(parse_memory_size("64k"), 64 * 1024)
    assert same(parse_memory_size("512m"), 512 * 1024**2)
    assert same(parse_memory_size("1.5g"), 1610612736)
    assert same(parse_memory_size("2t"), 2 * 1024**4)


def test_b_suffix():
    assert same(parse_memory_size("100B"), 100)
    assert same(parse_memory_size("100b"), 100)
    assert same(parse_memory_size("512MB"), 512 * 1024**2)
    assert same(parse_memory_size("1gb"), 1024**3)
    assert same(parse_memory_size("3Kb"), 3 * 1024)


def test_inner_whitespace():
    assert same(parse_memory_size("512 M"), 512 * 1024**2)
    assert same(parse_memory_size("\t64 KB\n"), 64 * 1024)
    assert same(parse_memory_size("1  g"), 1024**3)


def test_zero_with_unit():
    assert same(parse_memory_size("0G"), 0)
    assert same(parse_memory_size("0.0M"), 0)


def test_exact_fractions():
    assert same(parse_memory_size("0.5K"), 512)
    assert same(parse_memory_size("1.125K"), 1152)
    assert same(parse_memory_size("0.25M"), 262144)
    assert same(parse_memory_size("2.75G"), 2952790016)


def test_not_whole_bytes():
    for text in ["1.5", "1.5B", "0.1K", "0.001K", "1.0000001G"]:
        _error_message(text)


def test_large_values_are_exact():
    assert same(parse_memory_size("9007199254740993"), 9007199254740993)
    assert same(parse_memory_size("1024T"), 2**50)
    assert same(parse_memory_size("123456789012345678901234567890"), 123456789012345678901234567890)


def test_signs_rejected():
    for text in ["-1G", "+1G", "-0", "- 5M"]:
        _error_message(text)


def test_float_only_syntax_rejected():
    for text in ["1e3", "1E3M", "inf", "infG", "nan", "1_000", "0x10"]:
        _error_message(text)


def test_malformed_numbers():
    for text in ["", "   ", "G", "KB", ".5G", "1.G", "1..5G", "1.5.5G", "1 2G"]:
        _error_message(text)


def test_unknown_units():
    for text in ["1P", "1GG", "1 G B", "5 bytes", "1Q"]:
        _error_message(text)


def test_message_contains_input():
    for text in ["12X", "-1G", "abc", "0.1K", "1e3"]:
        message = _error_message(text)
        assert text in message, f"错误信息里应包含原始输入 {text!r}，实际是：{message!r}"


def test_result_is_exactly_int():
    for text, want in [("0", 0), ("1024", 1024), ("1.5G", 1610612736), ("0.5K", 512)]:
        got = parse_memory_size(text)
        assert type(got) is int, f"{text!r} 应返回 int，得到 {type(got).__name__}"
        assert same(got, want)


def test_non_ascii_digits_rejected():
    # 规则 2 只认 ASCII 的 0-9：\d 和 str.isdigit() 还会认全角、阿拉伯-印度、天城文数字
    for text in ["１２G", "１", "١٢", "12٣K", "१G", "²G", "1.５G"]:
        _error_message(text)


def test_other_units_rejected():
    # 只有表里的单位合法：KiB/MiB 这类写法、P/PB、单独的 I 都不行
    for text in ["1KiB", "1MiB", "1gib", "1TiB", "1PB", "1Ki", "1I", "1KBB"]:
        _error_message(text)
