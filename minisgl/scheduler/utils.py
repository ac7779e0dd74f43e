"""调度器里流动的几种小数据：排队中的请求、运行中的请求、每一步的输出。"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from minisgl.core import Req, SamplingParams
from minisgl.kvcache import CacheHandle

__all__ = ["FinishReason", "PendingReq", "SchedReq", "TokenOutput"]
# >> ch11
__all__ += ["AbortReq"]
# << ch11

# "stop"：采到了停止符；"length"：到了 max_tokens（或上下文的上限）；
# "error"：请求本身不合法，一个 token 也没生成；"abort"：被中止（第 11 章）
FinishReason = Literal["stop", "length", "error", "abort"]


@dataclass
class PendingReq:
    """还在排队的请求：只有 token 和采样参数，还没有页表的行，也没有 KV。"""

    uid: int
    input_ids: torch.Tensor  # CPU 上的一维 int32 张量
    sampling_params: SamplingParams = field(default_factory=SamplingParams)
    output_len: int = 0  # 校验时算出：最多生成几个 token
    # >> ch17
    # 被退回队列的请求（第 17 章）：已经生成的 token 并进了 input_ids，这是其中生成的个数；
    # output_len 是还能生成的个数
    generated: int = 0
    # << ch17


# >> ch11
@dataclass(frozen=True)
class AbortReq:
    """中止一个请求：不管它在排队、在分块、在运行还是正在前向，都释放它占的东西（恰好一次）。"""

    uid: int


# << ch11
@dataclass(eq=False)
class SchedReq(Req):
    """运行中的请求：``core.Req`` 加上调度器的账目。

    ``pages`` 是页表这一行用到的页号（主机上的副本）：前 ``cache_handle.cached_len // page_size``
    页属于前缀缓存（第 10 章），其余的是这个请求自己的，结束时还回空闲列表。在主机上留一份，
    分配、释放、检查账目都不用把页表从设备上读回来。
    """

    pages: list[int] = field(default_factory=list)
    cache_handle: CacheHandle = field(default_factory=lambda: CacheHandle(0))
    finish_reason: FinishReason | None = None
    # >> ch17
    # 被退回了等待队列（第 17 章）：行和页已经还回去；重新接纳时是另一个对象
    retracted: bool = False
    # << ch17

    # >> ch09
    @property
    def is_chunked(self) -> bool:
        """提示还没有全部送进模型（分块预填充的中间状态）：这时采样出的 token 没有意义。"""
        return self.device_len < self.host_len

    # << ch09
    # >> ch11
    @property
    def released(self) -> bool:
        """行和页已经还回去了：请求结束（或被中止）了。重叠调度时它可能还在正在前向的那一批里。"""
        # ~~ ch11 < ch17
        # ~ return self.finished
        # ~~
        # >> ch17
        return self.finished or self.retracted  # 被退回队列（第 17 章）的也一样
        # << ch17

    # << ch11
    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass(slots=True)
class TokenOutput:
    """调度器每一步对外的输出：某个请求新生成了一个 token（或者结束了）。

    ``token`` 为 None 表示没有新 token（出错的请求）；``finished`` 时 ``finish_reason`` 说明原因，
    出错时 ``error`` 是给人看的说明。每一步每个请求一个：不用 ``frozen``（冻结的 dataclass 每个
    字段都经 ``object.__setattr__`` 赋值，构造慢一倍多），``slots`` 又省下实例的字典。
    """

    uid: int
    token: int | None
    finished: bool = False
    finish_reason: FinishReason | None = None
    error: str | None = None
    # >> ch16
    prompt_tokens: int = 0  # 第 16 章：usage 要用的两个数
    completion_tokens: int = 0  # 到这一步为止生成的 token 数（含停止符）
    # << ch16
