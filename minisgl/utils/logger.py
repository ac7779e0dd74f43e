"""日志：一行一条的紧凑格式，外加"只在 rank 0 打印"的方法。

每个模块在顶部写 ``logger = init_logger(__name__)``，之后和标准库的 logger 一样用。
多卡张量并行时每个 rank 是一个独立的进程，同样的"模型加载完毕"会被打印 N 遍；
``logger.info_rank0(...)`` 只在 rank 0 打印。rank 由 ``set_log_rank`` 告诉本模块
（设置 TP 信息的代码负责调用它）；没有设置时就是单进程，当作 rank 0。

输出到 stdout，而不是 logging 默认的 stderr：程序自己的 ``print`` 也在 stdout，
两者在同一个流里才能保持先后顺序（stdout 接到管道时是块缓冲的，stderr 不缓冲，
分在两个流里，录下来的输出会前后错乱）。
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from minisgl.env import ENV

__all__ = ["RankLogger", "get_log_rank", "init_logger", "set_log_rank"]

_rank: int | None = None

_COLORS = {
    "DEBUG": "\033[36m",
    "INFO": "\033[32m",
    "WARNING": "\033[33m",
    "ERROR": "\033[31m",
    "CRITICAL": "\033[35m",
}
_RESET = "\033[0m"


def set_log_rank(rank: int | None) -> None:
    """设置本进程的 TP rank（None 表示不是多 rank 运行）。之后的日志行都带上 ``rank=N``。"""
    global _rank
    _rank = rank


def get_log_rank() -> int | None:
    return _rank


class _LiveStdoutHandler(logging.StreamHandler):
    """每次写日志时才去取 ``sys.stdout``。

    普通的 ``StreamHandler(sys.stdout)`` 在创建时就记住了当时的 stdout 对象。而 logger 通常在
    模块导入时创建，之后 Jupyter 会换掉 ``sys.stdout``（日志要出现在格子里），pytest 的
    ``capsys`` 也会换掉它（测试要检查日志），记住的旧对象就不对了。
    """

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, value: Any) -> None:  # 父类 __init__ 会赋值一次，忽略它
        pass


class _CompactFormatter(logging.Formatter):
    """``[12:34:56 engine|rank=1] INFO    消息``：时间、来源（和 rank）、级别、消息。"""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(record.created))
        tag = self.tag if _rank is None else f"{self.tag}|rank={_rank}"
        level = f"{record.levelname:<7}"
        if _use_color():  # 只在终端里上色：写进文件或管道的颜色码只是乱码
            level = f"{_COLORS.get(record.levelname, '')}{level}{_RESET}"
        text = f"[{when} {tag}] {level} {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def _use_color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


class RankLogger(logging.LoggerAdapter):
    """标准 Logger 的薄包装：``debug/info/warning/error/exception`` 照常可用，另加 ``*_rank0``。"""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})

    def _log_rank0(self, level: int, msg: object, args: tuple[object, ...], kwargs: Any) -> None:
        if _rank is None or _rank == 0:
            self.log(level, msg, *args, **kwargs)

    def debug_rank0(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log_rank0(logging.DEBUG, msg, args, kwargs)

    def info_rank0(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log_rank0(logging.INFO, msg, args, kwargs)

    def warning_rank0(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log_rank0(logging.WARNING, msg, args, kwargs)

    def error_rank0(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log_rank0(logging.ERROR, msg, args, kwargs)

    def critical_rank0(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log_rank0(logging.CRITICAL, msg, args, kwargs)


def init_logger(name: str, suffix: str = "", *, level: str | None = None) -> RankLogger:
    """创建（或重新配置）名为 ``name`` 的 logger。

    ``suffix`` 是显示在每行里的来源标签，例如 "initializer"；不给时用模块名去掉 ``minisgl.``。
    ``level`` 不给时读 ``MINISGL_LOG_LEVEL``（默认 INFO）——在调用这一刻读。
    """
    logger = logging.getLogger(name)
    logger.setLevel((level or ENV.LOG_LEVEL).upper())
    # 同名 logger 再配置一次（notebook 里重跑一个格子）时先清掉旧的 handler，免得每行打印两遍
    logger.handlers.clear()
    handler = _LiveStdoutHandler()
    handler.setFormatter(_CompactFormatter(suffix or name.removeprefix("minisgl.")))
    logger.addHandler(handler)
    logger.propagate = False  # 不再交给 root logger，免得别的库配置了 root 时重复输出
    return RankLogger(logger)
