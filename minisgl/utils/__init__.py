"""通用工具：整数运算、登记表、日志、设备、torch 小工具。

后面各章一律写 ``from minisgl.utils import div_even, init_logger, pick_device``，
不用记住每个名字在哪个文件里。基础的几个模块在这里直接导入；依赖更重的（ZMQ、HF 的文件）
在第一次用到时才导入，见文件末尾的 ``__getattr__``。
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any

from .device import (
    Event,
    NullEvent,
    NullStream,
    Stream,
    can_pin,
    cuda_capability,
    cuda_graph_available,
    current_stream,
    default_dtype,
    device_summary,
    is_sm90_supported,
    memory_info,
    new_event,
    new_stream,
    pick_device,
    pin_memory,
    set_stream,
    stream_context,
    synchronize,
)
from .logger import RankLogger, get_log_rank, init_logger, set_log_rank
from .misc import align_down, align_up, call_if_main, div_ceil, div_even, format_bytes
from .registry import Registry
from .torch_utils import dtype_from_str, nvtx_annotate, torch_dtype

__all__ = [
    # misc
    "align_down",
    "align_up",
    "call_if_main",
    "div_ceil",
    "div_even",
    "format_bytes",
    # registry
    "Registry",
    # logger
    "RankLogger",
    "get_log_rank",
    "init_logger",
    "set_log_rank",
    # device
    "Event",
    "NullEvent",
    "NullStream",
    "Stream",
    "can_pin",
    "cuda_capability",
    "cuda_graph_available",
    "current_stream",
    "default_dtype",
    "device_summary",
    "is_sm90_supported",
    "memory_info",
    "new_event",
    "new_stream",
    "pick_device",
    "pin_memory",
    "set_stream",
    "stream_context",
    "synchronize",
    # torch_utils
    "dtype_from_str",
    "nvtx_annotate",
    "torch_dtype",
]


def _exports(module: ModuleType, name: str) -> bool:
    """子模块是否对外提供 ``name``：有 ``__all__`` 就以它为准，否则看公开的、不是模块的属性。"""
    public = getattr(module, "__all__", None)
    if public is not None:
        return name in public
    return hasattr(module, name) and not isinstance(getattr(module, name), ModuleType)


def __getattr__(name: str) -> Any:
    """模块级的 ``__getattr__``（PEP 562）：``minisgl.utils`` 里找不到 ``name`` 时 Python 才调用它。

    为什么不把所有子模块都写在上面一起导入？后面章节加进来的工具模块依赖很重的库——
    通信用的要拉起 pyzmq，读 checkpoint 的要拉起 transformers。全部立即导入的话，只想用一下
    ``div_even`` 的代码也要多花几秒、装齐所有依赖。所以它们不写在这里：第一次有人要
    ``from minisgl.utils import X`` 而 X 不在上面时，按名字顺序逐个导入其余的子模块，
    找到提供 X 的那个就返回，并把 X 放进本模块的命名空间，下次直接命中，不再经过这里。
    附带的好处：往 ``utils/`` 里加一个模块，不需要改这个文件。
    """
    if name.startswith("_"):
        # __wrapped__、__file__ 之类是 Python 和各种工具在探测，不应该为此导入一堆模块
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    failed: list[str] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        try:
            # 已经导入过的模块这里只是一次字典查找。不能跳过它们：用户可能先
            # ``import minisgl.utils.xxx``，再 ``from minisgl.utils import 其中的名字``
            module = importlib.import_module(f"{__name__}.{info.name}")
        except ImportError as e:  # 缺了某个可选依赖：记下来，继续在别的模块里找
            failed.append(f"{info.name} ({e})")
            continue
        if _exports(module, name):
            value = getattr(module, name)
            globals()[name] = value
            return value
    hint = f"; could not import: {', '.join(failed)}" if failed else ""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}{hint}")
