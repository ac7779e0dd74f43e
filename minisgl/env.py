"""``MINISGL_*`` 环境变量：集中声明、带类型、用到时才读。

为什么不在导入时一次读完？因为"什么时候导入"不由我们控制：测试用 ``monkeypatch.setenv``
改环境变量时，``minisgl.env`` 往往早就被别的模块导入了。每次访问 ``ENV.X`` 都重新读
``os.environ``，改了就立刻生效，没有"先导入还是先设置"的顺序问题。读一次环境变量只是一次字典
查找加一次解析，只要别在每个 token 的热路径上读，代价可以忽略。

写错的值要大声报错，而不是悄悄退回默认值：``MINISGL_SHELL_TOP_K=abc`` 如果被静默忽略，
用户会以为设置生效了，花很久去找"为什么采样参数不对"。

本模块不导入 torch：``import minisgl`` 和命令行参数解析都应该很轻。
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, TypeVar, overload

PREFIX = "MINISGL_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

T = TypeVar("T")

# ---------------------------------------------------------------- 解析函数
# 每个都是 str -> 值，解析不了就抛 ValueError

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def parse_bool(text: str) -> bool:
    """布尔值：1/true/yes/on 为真，0/false/no/off 为假（不分大小写），其他一律报错。"""
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"expected 1/true/yes/on or 0/false/no/off, got {text!r}")


def parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {text!r}") from None


def parse_float(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):  # nan/inf 能被 float() 接受，但作为采样参数毫无意义
        raise ValueError(f"expected a finite number, got {text!r}")
    return value


def parse_str(text: str) -> str:
    return text.strip()


# 数字 + 可选单位；单位按 1024 进位，后面可以再跟 B 或 iB：512M、1G、1.5GiB、64kb、4096
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([KMGT])(?:i?B)?|B)?", re.IGNORECASE)
_UNIT_BYTES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_memory_size(text: str) -> int:
    """内存大小 -> 字节数。"1G" 是 1024**3，和 ``free -h``、``nvidia-smi`` 的习惯一致。"""
    m = _MEMORY.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"expected a size such as 512M, 1G or 1.5G, got {text!r}")
    number, unit = m.group(1), (m.group(2) or "").upper()
    return int(float(number) * _UNIT_BYTES[unit])


def choice_parser(choices: Iterable[str]) -> Callable[[str], str]:
    """只接受给定取值之一（不分大小写，统一成大写）的解析函数。"""
    allowed = tuple(choices)

    def parse(text: str) -> str:
        word = text.strip().upper()
        if word not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {text!r}")
        return word

    return parse


# ---------------------------------------------------------------- 一个变量的声明


class EnvVar(Generic[T]):
    """一个环境变量：默认值、解析函数、一句说明。

    它是一个描述符（descriptor），要写成 ``EnvSettings`` 的类属性：Python 在类定义时调用
    ``__set_name__`` 告诉它属性名，完整的变量名就是 ``MINISGL_`` + 属性名，不用再写一遍；
    每次通过实例访问（``ENV.SHELL_TOP_K``）都会调用 ``__get__``，在那一刻读取并解析。
    """

    def __init__(self, default: T, parse: Callable[[str], T], doc: str) -> None:
        self.default = default
        self.parse = parse
        self.doc = doc
        self.name = ""  # 由 __set_name__ 填上

    def __set_name__(self, owner: type, attr: str) -> None:
        self.name = PREFIX + attr

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> EnvVar[T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> T | EnvVar[T]:
        if obj is None:  # 通过类访问（EnvSettings.SHELL_TOP_K）拿到声明本身
            return self
        return self.read()

    def __set__(self, obj: object, value: object) -> None:
        # 有了 __set__，``ENV.X = 1`` 不会悄悄在实例上盖住描述符；该改的是环境变量本身
        raise AttributeError(f"{self.name} is read from the environment; set os.environ instead")

    @property
    def raw(self) -> str | None:
        """环境里的原始字符串；没有设置（或只有空白）时是 None。"""
        text = os.environ.get(self.name)
        return text if text is not None and text.strip() else None

    def read(self) -> T:
        raw = self.raw
        if raw is None:
            return self.default
        try:
            return self.parse(raw)
        except ValueError as e:
            raise ValueError(f"invalid environment variable {self.name}={raw!r}: {e}") from None


def env_bool(default: bool, doc: str) -> EnvVar[bool]:
    return EnvVar(default, parse_bool, doc)


def env_int(default: int, doc: str) -> EnvVar[int]:
    return EnvVar(default, parse_int, doc)


def env_float(default: float, doc: str) -> EnvVar[float]:
    return EnvVar(default, parse_float, doc)


def env_str(default: str | None, doc: str) -> EnvVar[str | None]:
    return EnvVar(default, parse_str, doc)


def env_memory(default: int | None, doc: str) -> EnvVar[int | None]:
    return EnvVar(default, parse_memory_size, doc)


def env_choice(default: str, choices: Iterable[str], doc: str) -> EnvVar[str]:
    return EnvVar(default, choice_parser(choices), doc)


# ---------------------------------------------------------------- 全部变量


@dataclass(frozen=True)
class EnvVarState:
    """``ENV.describe()`` 的一行：变量名、当前值、默认值、是否在环境里设置了、说明。"""

    name: str
    value: Any
    default: Any
    is_set: bool
    doc: str


class EnvSettings:
    """所有 ``MINISGL_*`` 变量。只声明现在用得上的；后面的章节需要新开关时再加一行。"""

    DEVICE = env_str(None, "使用的设备（cpu、cuda、cuda:1、mps）；不设置则按 cuda > mps > cpu 挑选")
    CPU_MEMORY_BUDGET = env_memory(None, "本进程在 CPU 上最多用多少内存（如 4G）；不设置则不限")
    LOG_LEVEL = env_choice("INFO", LOG_LEVELS, "日志级别：DEBUG、INFO、WARNING、ERROR、CRITICAL")
    SHELL_MAX_TOKENS = env_int(2048, "交互模式每轮最多生成的 token 数")
    SHELL_TOP_K = env_int(-1, "交互模式的 top-k（-1 表示不限）")
    SHELL_TOP_P = env_float(1.0, "交互模式的 top-p")
    SHELL_TEMPERATURE = env_float(0.6, "交互模式的温度")
    # >> ch11
    DISABLE_OVERLAP_SCHEDULING = env_bool(False, "关闭重叠调度：每一步等结果处理完再发下一步")
    # << ch11
    # >> ch19
    DISABLE_PDL = env_bool(False, "关闭 Triton kernel 的依赖启动（Hopper 起的 GPU 上默认打开）")
    # << ch19

    @classmethod
    def variables(cls) -> list[EnvVar[Any]]:
        """按声明顺序列出全部变量（包括子类新加的）。"""
        found: dict[str, EnvVar[Any]] = {}
        for klass in reversed(cls.__mro__):
            for value in vars(klass).values():
                if isinstance(value, EnvVar):
                    found[value.name] = value
        return list(found.values())

    def describe(self) -> list[EnvVarState]:
        """每个变量的当前状态。顺带把所有变量解析一遍：有写错的值，这里就会报错。"""
        return [
            EnvVarState(var.name, var.read(), var.default, var.raw is not None, var.doc)
            for var in self.variables()
        ]


# 全局唯一的实例。模块只会被导入一次，模块级变量天然就是单例，不需要 __new__ 的技巧。
ENV = EnvSettings()
