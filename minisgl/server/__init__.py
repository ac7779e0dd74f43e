"""在线服务：命令行参数（``args``）、API Server（``api_server``）和启动器（``launch``）。

``python -m minisgl --model ...`` 调用这里的 ``launch_server``。
"""

from __future__ import annotations

from .args import ServerArgs, parse_args
from .launch import launch_server

__all__ = ["ServerArgs", "launch_server", "parse_args"]
