"""调度器的配置：在 Engine 的配置上加几项"怎么排队、怎么组批"的参数。"""

from __future__ import annotations

from dataclasses import dataclass, field

from minisgl.distributed import DistributedInfo
from minisgl.engine import EngineConfig

__all__ = ["SchedulerConfig"]


@dataclass
class SchedulerConfig(EngineConfig):
    """``EngineConfig`` 的全部字段，加上调度器自己的。"""

    # 一个 prefill 批次最多送进模型多少个新 token：太大，一步 prefill 太久，正在 decode 的请求
    # 都得等着；太小，长提示要好几步才能算完
    max_extend_tokens: int = 8192
    # ~~ ch08 < ch10
    # ~ cache_type: str = "naive"  # 前缀缓存：naive（什么都不缓存）
    # ~~
    # >> ch10
    cache_type: str = "radix"  # 前缀缓存：radix（复用相同的前缀）或 naive（什么都不缓存）
    # << ch10
    # 停止符；None 表示读模型的 config.json / generation_config.json（测试里可以指定一个）
    eos_token_ids: tuple[int, ...] | None = None
    tp_info: DistributedInfo = field(default_factory=lambda: DistributedInfo(0, 1))
    # >> ch17
    # 接纳新请求时，为每个运行中的请求预留往后几个 token 的页（乐观接纳）。None：预留到生成完
    # （第 8 章的规则，永远不会缺页，但没写 max_tokens 的请求会占住整个上下文那么多页）
    kv_headroom: int | None = 256
    # << ch17
    # >> ch14
    # 多进程服务时的 ZMQ 地址；都是 None 时调度器在本进程里离线运行（LocalIO）
    zmq_backend_addr: str | None = None  # tokenizer → rank 0：rank 0 绑定一个 PULL
    zmq_detokenizer_addr: str | None = None  # rank 0 → detokenizer：detokenizer 绑定 PULL
    zmq_broadcast_addr: str | None = None  # rank 0 → 其他 rank：rank 0 绑定 XPUB
    dist_init_addr: str | None = None  # tp > 1 且还没有进程组时，torch.distributed 的 init_method
    # << ch14

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_extend_tokens < 1:
            raise ValueError(f"max_extend_tokens must be >= 1, got {self.max_extend_tokens}")
        # >> ch19
        if self.cuda_graph_prefill_tokens is None:  # prefill 的图录到一步的上限为止
            self.cuda_graph_prefill_tokens = self.max_extend_tokens
        elif self.cuda_graph_prefill_tokens < 0:
            raise ValueError(
                f"cuda_graph_prefill_tokens must be >= 0, got {self.cuda_graph_prefill_tokens}"
            )
        # << ch19
        # >> ch17
        if self.kv_headroom is not None and self.kv_headroom < 0:
            raise ValueError(f"kv_headroom must be >= 0 or None, got {self.kv_headroom}")
        # << ch17
