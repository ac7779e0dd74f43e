"""引擎的核心数据：采样参数、请求（``Req``）、批次（``Batch``）和每个进程一份的上下文（``Context``）。

一次前向的数据流是这样的::

    多个请求 Req ──┐
                   ├─ Batch（prefill 或 decode）：所有请求的新 token 首尾相接，排成一维
    页表 + KV 池 ──┘        │
                            ▼
          with ctx.forward_batch(batch):  model.forward()
                            │
          每一层的 AttentionLayer 从 get_global_ctx().batch 取位置、out_loc 和元数据

模型的 ``forward()`` 不带参数：一层层传下去的只有隐藏状态，"这一批是谁、KV 写到哪、
注意力怎么算"都放在全局的 ``Context`` 里，哪一层要用就自己去取。这样模型的代码和
transformers 的写法几乎一样，批次的细节只有注意力层和 LM head 关心。

本文件只依赖 torch：后端、KV 池的类型只在类型检查时导入，``core`` 不会把它们拉进来。
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Literal

import torch

if TYPE_CHECKING:
    from minisgl.attention import BaseAttnBackend, BaseAttnMetadata
    from minisgl.kvcache import BaseKVCachePool

__all__ = [
    "Batch",
    "Context",
    "Req",
    "SamplingParams",
    "get_global_ctx",
    "reset_global_ctx",
    "set_global_ctx",
]


@dataclass
class SamplingParams:
    """一个请求的采样参数。字段的顺序和默认值是对外的约定：第 12 章按字段名序列化它。"""

    temperature: float = 0.0  # <= 0 表示贪心
    top_k: int = -1  # <= 0 表示不限制
    top_p: float = 1.0
    ignore_eos: bool = False  # 生成到 eos 也不停，直到 max_tokens（压测时用）
    max_tokens: int = 1024
    # >> ch16
    # 第 16 章：给了 seed 的请求，第 i 个位置用的随机数只由 (seed, i) 决定，和同批的其他请求无关
    seed: int | None = None
    # << ch16

    @property
    def is_greedy(self) -> bool:
        """温度为 0 或只留 1 个候选：直接取 argmax。top-p 管不着——概率最大的那个 token
        总在 top-p 的候选里。温度小于 1e-5 也按贪心：这样的温度采样结果本来就是 argmax，
        而 5e-324 这种数变成 float32 就是 0，logits 除以它会得到 inf 和 nan（第 17 章的
        模糊测试找到的）。"""
        return self.temperature < 1e-5 or self.top_k == 1


@dataclass(eq=False)
class Req:
    """一个请求在引擎里的状态。核心是三个长度（都以 token 计）::

        input_ids:  [ p0 p1 p2 p3 p4 p5 p6 | o0 o1 ... ]   主机上已知的全部 token
                      └── cached_len ──┘                   KV 已经在池子里
                      └────────── device_len ──────┘       这一步之后 KV 在池子里
                                       └ extend_len ┘      这一步要算的 token

    - ``cached_len``：前面这么多 token 的 K/V 已经写进 KV 池（上一步算过，或者命中了前缀缓存）；
    - ``device_len``：这一步前向之后，KV 池里会有这么多 token；
    - ``extend_len = device_len - cached_len``：这一步送进模型的新 token 数。
      prefill 时是整段提示（减去命中的前缀），decode 时恒为 1。

    第 ``i`` 个 token 的 K/V 存在哪个槽位，由页表的第 ``table_idx`` 行第 ``i`` 列给出。
    ``eq=False``：两个请求即使内容相同也是两个请求，比较和哈希都按对象身份。
    """

    input_ids: torch.Tensor  # CPU 上的一维整数张量：提示 + 已经生成的 token
    table_idx: int  # 页表里属于这个请求的那一行
    cached_len: int = 0
    output_len: int = 0  # 最多还能生成几个 token（调度器按 max_tokens 和上下文长度算出）
    uid: int = 0
    sampling_params: SamplingParams = field(default_factory=SamplingParams)
    device_len: int = field(init=False)
    prompt_len: int = field(init=False)
    # append_host 的缓冲区：input_ids 是它开头的一段，后面留着空位；_host_view 是同一块内存的
    # numpy 视图，写一个元素用它
    _host_buffer: torch.Tensor | None = field(default=None, init=False, repr=False)
    _host_view: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.input_ids.dim() != 1 or self.input_ids.device.type != "cpu":
            raise ValueError(
                f"input_ids must be a 1-D CPU tensor, got shape {tuple(self.input_ids.shape)} "
                f"on {self.input_ids.device}"
            )
        self.device_len = len(self.input_ids)
        self.prompt_len = len(self.input_ids)
        # 至少要算 1 个 token：提示全部命中缓存时，最后一个 token 也得重算，才有 logits 可采样
        if not 0 <= self.cached_len < self.device_len:
            raise ValueError(
                f"need 0 <= cached_len < device_len, got cached_len={self.cached_len}, "
                f"device_len={self.device_len}"
            )
        if self.output_len < 0 or self.table_idx < 0:
            raise ValueError(
                f"output_len and table_idx must be >= 0, got {self.output_len}, {self.table_idx}"
            )

    @property
    def extend_len(self) -> int:
        """这一步送进模型的新 token 数。"""
        return self.device_len - self.cached_len

    @property
    def max_device_len(self) -> int:
        """生成结束时 KV 池里最多会有的 token 数（页表这一行至少要这么长）。"""
        return self.prompt_len + self.output_len

    @property
    def remain_len(self) -> int:
        """还能再生成几个 token。"""
        return self.max_device_len - self.device_len

    @property
    def can_decode(self) -> bool:
        return self.remain_len > 0

    @property
    def host_len(self) -> int:
        """主机上已知的 token 数，即 ``len(input_ids)``。调度器每一步对每个请求都要问几次，
        而张量的 ``len()`` 要经过 Python 写的 ``Tensor.__len__``，比直接读形状慢三四倍。"""
        return self.input_ids.shape[0]

    @property
    def output_ids(self) -> list[int]:
        """已经生成的 token。"""
        return self.input_ids[self.prompt_len :].tolist()

    def complete_one(self) -> None:
        """一步前向之后：这一步的 KV 都进了池子；下一步要送进去的是刚采样出的那 1 个 token。"""
        self.cached_len = self.device_len
        self.device_len += 1

    def append_host(self, next_token: int | torch.Tensor) -> None:
        """把采样出的 token 记到主机上的 ``input_ids`` 末尾。

        每次 ``torch.cat`` 都要新建几个小张量、把整段拷一遍，一批 256 个请求每一步就是 256 次。
        这里留一块按容量翻倍的缓冲区，``input_ids`` 是它开头的一段，追加只写一个元素。别处早先
        拿到的 ``input_ids`` 是更短的一段，不受影响。那一个元素经 numpy 视图写：给张量的一个元素
        赋值要近两微秒，numpy 只要几十纳秒。
        """
        n = self.host_len
        buffer = self._host_buffer
        # 第一次追加、放满了，或者 input_ids 不是这块缓冲区的（比如从别的请求那里接过来的）：
        # 换一块两倍大的，已有的 token 拷过去
        if buffer is None or n >= buffer.shape[0] or buffer.data_ptr() != self.input_ids.data_ptr():
            buffer = torch.empty(max(2 * n, 16), dtype=self.input_ids.dtype)
            buffer[:n] = self.input_ids
            self._host_buffer, self._host_view = buffer, buffer.numpy()
        self._host_view[n] = int(next_token)
        self.input_ids = buffer[: n + 1]

    def __repr__(self) -> str:
        return (
            f"Req(uid={self.uid}, table_idx={self.table_idx}, cached_len={self.cached_len}, "
            f"device_len={self.device_len}, max_device_len={self.max_device_len})"
        )


Phase = Literal["prefill", "decode"]


@dataclass(eq=False)
class Batch:
    """一次前向要处理的一组请求。

    所有请求这一步的新 token 首尾相接排成一维（"ragged"，不补齐）：第 ``i`` 个请求占
    ``[cu[i], cu[i+1])`` 这一段，``cu`` 是 ``extend_len`` 的前缀和。下面这些字段都是
    这个一维排列上的张量，长度是总 token 数 ``T``，在计算设备上：

    - ``input_ids``：``(T,)`` 送进 embedding 的 token；
    - ``positions``：``(T,)`` 每个 token 在自己序列里的位置（``cached_len .. device_len-1``），
      RoPE 用它；
    - ``out_loc``：``(T,)`` 每个 token 的 K/V 要写进 KV 池的哪个槽位；
    - ``attn_metadata``：注意力后端在 ``prepare_metadata`` 里算好的、每层都要用的东西。

    前三个由构造批次的一方填（第 4、5 章是 ``attention.prepare_batch``，第 8 章起是调度器），
    最后一个由后端填，所以它们都不在构造函数里。
    """

    reqs: list[Req]
    phase: Phase
    input_ids: torch.Tensor = field(init=False)
    positions: torch.Tensor = field(init=False)
    out_loc: torch.Tensor = field(init=False)
    attn_metadata: BaseAttnMetadata = field(init=False)

    def __post_init__(self) -> None:
        if self.phase not in ("prefill", "decode"):
            raise ValueError(f"phase must be 'prefill' or 'decode', got {self.phase!r}")
        if not self.reqs:
            raise ValueError("a batch needs at least one request")
        if self.phase == "decode":
            bad = [r for r in self.reqs if r.extend_len != 1]
            if bad:
                raise ValueError(f"every request in a decode batch has extend_len 1, got {bad}")

    @property
    def is_prefill(self) -> bool:
        return self.phase == "prefill"

    @property
    def is_decode(self) -> bool:
        return self.phase == "decode"

    @property
    def size(self) -> int:
        """请求数（不是 token 数）。"""
        return len(self.reqs)

    @property
    def num_tokens(self) -> int:
        """这一步送进模型的 token 总数 ``T``。"""
        return sum(r.extend_len for r in self.reqs)

    def __repr__(self) -> str:
        # 不用 dataclass 生成的 repr：init=False 的字段可能还没填，一访问就 AttributeError
        return f"Batch(phase={self.phase!r}, size={self.size}, num_tokens={self.num_tokens})"


@dataclass(eq=False)
class Context:
    """每个进程一份的推理上下文：页表、KV 池、注意力后端，以及"正在前向的那个批次"。

    - ``page_table``：``(行数, 最大序列长度)`` 的整数张量，第 ``r`` 行第 ``i`` 列是第 ``r`` 行
      那个请求第 ``i`` 个 token 的 K/V 所在的**槽位**（不是页号）。页大小大于 1 时，
      同一页的槽位是连续的 ``page * page_size + 0 .. page_size-1``；
    - ``kv_cache``：所有层的 K/V 存在这里，按槽位读写；
    - ``attn_backend``：拿页表和 KV 池算注意力。

    三者由 Engine 创建；不经过 Engine 的演示和测试也可以手工创建。
    """

    page_table: torch.Tensor
    kv_cache: BaseKVCachePool
    attn_backend: BaseAttnBackend
    _batch: Batch | None = field(default=None, init=False, repr=False)

    @property
    def page_size(self) -> int:
        return self.kv_cache.page_size

    @property
    def batch(self) -> Batch:
        """正在前向的批次；不在 ``forward_batch`` 里时访问它是 bug，直接报错。"""
        if self._batch is None:
            raise RuntimeError("no active batch: call the model inside ctx.forward_batch(batch)")
        return self._batch

    @contextmanager
    def forward_batch(self, batch: Batch) -> Iterator[Batch]:
        """在 ``with`` 块里，``ctx.batch`` 就是 ``batch``；离开时（出错也一样）清空。

        不允许嵌套：同一时刻只有一个批次在前向。嵌套通常意味着调度出了错——
        内层退出时会把外层的批次也清掉，外层剩下的层就读不到批次了。
        检查放在 ``try`` 之前：嵌套失败时外层的批次保持不变。
        """
        if self._batch is not None:
            raise RuntimeError("nested forward_batch: a batch is already being forwarded")
        self._batch = batch
        try:
            yield batch
        finally:
            self._batch = None


_GLOBAL_CTX: Context | None = None


def set_global_ctx(ctx: Context) -> None:
    """设置本进程的上下文。已经设置过另一个时报错（重复设置同一个对象没关系）。"""
    global _GLOBAL_CTX
    if _GLOBAL_CTX is not None and _GLOBAL_CTX is not ctx:
        raise RuntimeError("global context is already set; call reset_global_ctx() first")
    _GLOBAL_CTX = ctx


def get_global_ctx() -> Context:
    if _GLOBAL_CTX is None:
        raise RuntimeError("global context is not set; call set_global_ctx(ctx) first")
    return _GLOBAL_CTX


def reset_global_ctx() -> None:
    """回到"没有上下文"的状态（测试和 notebook 重跑时用）。"""
    global _GLOBAL_CTX
    _GLOBAL_CTX = None
