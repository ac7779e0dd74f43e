"""第 1 章：环境变量的解析、惰性读取和错误信息。"""

from __future__ import annotations

import pytest

from minisgl.env import (
    ENV,
    EnvSettings,
    env_bool,
    parse_bool,
    parse_memory_size,
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """测试从干净的环境开始：章节工具运行测试时可能设置了 MINISGL_DEVICE 等变量。"""
    for var in EnvSettings.variables():
        monkeypatch.delenv(var.name, raising=False)


@pytest.mark.parametrize("text", ["1", "true", "TRUE", "Yes", "on", " on "])
def test_bool_true_words(text: str) -> None:
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["0", "false", "False", "NO", "off", "\toff\n"])
def test_bool_false_words(text: str) -> None:
    assert parse_bool(text) is False


@pytest.mark.parametrize("text", ["2", "maybe", "enable", "y", ""])
def test_bool_rejects_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match="1/true/yes/on or 0/false/no/off"):
        parse_bool(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("100B", 100),
        ("64K", 64 * 1024),
        ("64kb", 64 * 1024),
        ("512M", 512 * 1024**2),
        ("1G", 1024**3),
        ("1.5G", 1024**3 * 3 // 2),
        ("2GiB", 2 * 1024**3),
        (" 1 g ", 1024**3),
        ("1T", 1024**4),
    ],
)
def test_memory_size_parsing(text: str, expected: int) -> None:
    assert parse_memory_size(text) == expected


@pytest.mark.parametrize("text", ["", "G", "1X", "-1G", "1.2.3G", "one gig", "1GG"])
def test_memory_size_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="512M, 1G or 1.5G"):
        parse_memory_size(text)


def test_defaults_when_unset() -> None:
    assert ENV.DEVICE is None
    assert ENV.CPU_MEMORY_BUDGET is None
    assert ENV.LOG_LEVEL == "INFO"
    assert ENV.SHELL_MAX_TOKENS == 2048
    assert ENV.SHELL_TOP_K == -1
    assert ENV.SHELL_TOP_P == 1.0
    assert ENV.SHELL_TEMPERATURE == 0.6


def test_values_are_parsed_to_their_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINISGL_SHELL_MAX_TOKENS", " 512 ")
    monkeypatch.setenv("MINISGL_SHELL_TOP_P", "0.9")
    monkeypatch.setenv("MINISGL_CPU_MEMORY_BUDGET", "1.5G")
    monkeypatch.setenv("MINISGL_LOG_LEVEL", "debug")
    monkeypatch.setenv("MINISGL_DEVICE", " cuda:1 ")
    assert ENV.SHELL_MAX_TOKENS == 512
    assert ENV.SHELL_TOP_P == 0.9
    assert ENV.CPU_MEMORY_BUDGET == 1024**3 * 3 // 2
    assert ENV.LOG_LEVEL == "DEBUG"  # 不分大小写，统一成大写
    assert ENV.DEVICE == "cuda:1"


def test_read_at_access_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """ENV 早已导入，之后改环境变量照样立刻生效；删掉后回到默认值。"""
    assert ENV.SHELL_TEMPERATURE == 0.6
    monkeypatch.setenv("MINISGL_SHELL_TEMPERATURE", "0")
    assert ENV.SHELL_TEMPERATURE == 0.0
    monkeypatch.delenv("MINISGL_SHELL_TEMPERATURE")
    assert ENV.SHELL_TEMPERATURE == 0.6


def test_blank_value_means_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINISGL_SHELL_TOP_K", "  ")
    assert ENV.SHELL_TOP_K == -1


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("MINISGL_SHELL_TOP_K", "abc", "expected an integer"),
        ("MINISGL_SHELL_TOP_K", "1.5", "expected an integer"),
        ("MINISGL_SHELL_TOP_P", "high", "expected a number"),
        ("MINISGL_SHELL_TEMPERATURE", "nan", "finite"),
        ("MINISGL_CPU_MEMORY_BUDGET", "lots", "512M, 1G or 1.5G"),
        ("MINISGL_LOG_LEVEL", "LOUD", "DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    ],
)
def test_bad_values_fail_loudly(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, reason: str
) -> None:
    """写错的值要报错，并且说清是哪个变量、什么值、期望什么——而不是静默退回默认值。"""
    monkeypatch.setenv(name, value)
    attr = name.removeprefix("MINISGL_")
    with pytest.raises(ValueError) as info:
        getattr(ENV, attr)
    message = str(info.value)
    assert name in message and repr(value) in message and reason in message


def test_assignment_is_refused() -> None:
    with pytest.raises(AttributeError, match="set os.environ instead"):
        ENV.SHELL_TOP_K = 5  # type: ignore[misc]
    assert ENV.SHELL_TOP_K == -1


def test_describe_lists_values_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINISGL_SHELL_MAX_TOKENS", "64")
    states = {s.name: s for s in ENV.describe()}
    for name in [
        "MINISGL_DEVICE",
        "MINISGL_CPU_MEMORY_BUDGET",
        "MINISGL_LOG_LEVEL",
        "MINISGL_SHELL_MAX_TOKENS",
        "MINISGL_SHELL_TOP_K",
        "MINISGL_SHELL_TOP_P",
        "MINISGL_SHELL_TEMPERATURE",
    ]:
        assert name in states and states[name].doc
    tokens = states["MINISGL_SHELL_MAX_TOKENS"]
    assert (tokens.value, tokens.default, tokens.is_set) == (64, 2048, True)
    top_k = states["MINISGL_SHELL_TOP_K"]
    assert (top_k.value, top_k.default, top_k.is_set) == (-1, -1, False)


def test_describe_reports_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINISGL_SHELL_TOP_P", "wide")
    with pytest.raises(ValueError, match="MINISGL_SHELL_TOP_P"):
        ENV.describe()


def test_a_subclass_adds_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """后面的章节加开关只需一行声明：名字由属性名自动得到。"""

    class MoreSettings(EnvSettings):
        EXTRA_SWITCH = env_bool(False, "一个新开关")

    names = [v.name for v in MoreSettings.variables()]
    assert names[-1] == "MINISGL_EXTRA_SWITCH"
    assert names[:-1] == [v.name for v in EnvSettings.variables()]
    settings = MoreSettings()
    assert settings.EXTRA_SWITCH is False
    monkeypatch.setenv("MINISGL_EXTRA_SWITCH", "on")
    assert settings.EXTRA_SWITCH is True
