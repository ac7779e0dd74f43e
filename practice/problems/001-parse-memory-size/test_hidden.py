"""001 的隐藏测试：边界情况。"""

from solution import parse_memory_size


def _error_message(text):
    """调用 parse_memory_size(text)，要求它抛 ValueError，返回错误信息。"""
    try:
        value = parse_memory_size(text)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"parse_memory_size({text!r}) 应当抛出 ValueError，实际返回了 {value!r}")


def test_lowercase_units():
    assert parse_memory_size("64k") == 64 * 1024
    assert parse_memory_size("512m") == 512 * 1024**2
    assert parse_memory_size("1.5g") == 1610612736
    assert parse_memory_size("2t") == 2 * 1024**4


def test_b_suffix():
    assert parse_memory_size("100B") == 100
    assert parse_memory_size("100b") == 100
    assert parse_memory_size("512MB") == 512 * 1024**2
    assert parse_memory_size("1gb") == 1024**3
    assert parse_memory_size("3Kb") == 3 * 1024


def test_inner_whitespace():
    assert parse_memory_size("512 M") == 512 * 1024**2
    assert parse_memory_size("\t64 KB\n") == 64 * 1024
    assert parse_memory_size("1  g") == 1024**3


def test_zero_with_unit():
    assert parse_memory_size("0G") == 0
    assert parse_memory_size("0.0M") == 0


def test_exact_fractions():
    assert parse_memory_size("0.5K") == 512
    assert parse_memory_size("1.125K") == 1152
    assert parse_memory_size("0.25M") == 262144
    assert parse_memory_size("2.75G") == 2952790016


def test_not_whole_bytes():
    for text in ["1.5", "1.5B", "0.1K", "0.001K", "1.0000001G"]:
        _error_message(text)


def test_large_values_are_exact():
    assert parse_memory_size("9007199254740993") == 9007199254740993
    assert parse_memory_size("1024T") == 2**50
    assert parse_memory_size("123456789012345678901234567890") == 123456789012345678901234567890


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
