"""001 的可见测试。"""

from solution import parse_memory_size


def _error_message(text):
    """调用 parse_memory_size(text)，要求它抛 ValueError，返回错误信息。"""
    try:
        value = parse_memory_size(text)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"parse_memory_size({text!r}) 应当抛出 ValueError，实际返回了 {value!r}")


def test_plain_bytes():
    assert parse_memory_size("1024") == 1024
    assert parse_memory_size("0") == 0


def test_units():
    assert parse_memory_size("64K") == 64 * 1024
    assert parse_memory_size("512M") == 512 * 1024**2
    assert parse_memory_size("1G") == 1024**3
    assert parse_memory_size("2T") == 2 * 1024**4


def test_decimal_number():
    assert parse_memory_size("1.5G") == 1610612736


def test_surrounding_whitespace():
    assert parse_memory_size(" 4G ") == 4 * 1024**3


def test_unknown_unit():
    message = _error_message("12X")
    assert "12X" in message, f"错误信息里应包含原始输入 12X，实际是：{message!r}"
