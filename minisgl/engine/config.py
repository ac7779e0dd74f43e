"""Engine 的配置：一个 dataclass，把"加载哪个模型、KV 池开多大、要不要 CUDA Graph"集中在一处。

调用方（调度器、命令行）只往这里填值；Engine 自己不读命令行，也不读环境变量
（设备除外：``device=None`` 时按 ``pick_device`` 的规则选）。
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = ["DEFAULT_GRAPH_BATCH_SIZES", "EngineConfig", "has_weight_files"]

# decode 常见的批大小：小批次逐个捕获，大批次隔 8 个一档。真实批大小向上补齐到最近的一档
DEFAULT_GRAPH_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 24, 32)
# >> ch19
# 注意力换成 Triton 之后，大批次的 decode 也是 kernel 启动的开销为主：32 之后接着隔 8 个一档，
# 一直排到 512；实际只捕获不超过请求表行数（max_running_reqs）的那些
DEFAULT_GRAPH_BATCH_SIZES = (*DEFAULT_GRAPH_BATCH_SIZES, *range(40, 513, 8))
# << ch19


def has_weight_files(model_path: str | Path) -> bool:
    """本地文件夹里有没有 safetensors 权重。没有时（比如只有配置的 ``qwen3-0.6b-shape``），
    main 们用 ``dummy_weights=True`` 照样按真实形状跑起来。Hub 上的名字算"有"：加载时会下载。"""
    folder = Path(model_path)
    return not folder.is_dir() or any(folder.glob("*.safetensors"))


@dataclass
class EngineConfig:
    """一个 Engine（一个 rank）需要知道的全部事情。"""

    model_path: str | Path
    dtype: torch.dtype | None = None  # None：设备的默认精度（CUDA bf16，其余 float32）
    device: torch.device | str | None = None  # None：MINISGL_DEVICE > cuda > mps > cpu
    page_size: int = 1
    attention_backend: str = "auto"
    # KV 池的大小，三种说法，优先级从高到低：
    num_pages: int | None = None  # 1. 直接给页数（测试、调试时最方便）
    memory_budget: int | None = None  # 2. 给 KV 池一个字节数上限
    memory_fraction: float = 0.9  # 3. 整个进程最多用掉设备总内存的这个比例，剩下的都给 KV 池
    max_running_reqs: int = 64  # 页表的行数：同时在跑的请求数上限
    max_seq_len: int | None = None  # 页表的列数；None：模型的 max_position
    cuda_graph_batch_sizes: tuple[int, ...] = field(default=DEFAULT_GRAPH_BATCH_SIZES)
    use_cuda_graph: bool = True  # 只在 CUDA 上生效；其余设备上 GraphRunner 总是关闭
    # >> ch19
    # prefill 的 CUDA Graph 录到一步多少个 token 为止（``prefill_graph_token_counts`` 分档）。
    # None：调度器一步的上限 max_extend_tokens（单独用 Engine 时不录）；0：不录
    cuda_graph_prefill_tokens: int | None = None
    # << ch19
    seed: int = 0  # 采样用的随机数种子：同一个种子、同样的输入，采样结果相同
    # 不读权重，按配置建好模型后填随机数：没有权重文件（或网络）时测速度、看显存用，输出没有意义
    dummy_weights: bool = False

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {self.page_size}")
        if self.num_pages is not None and self.num_pages < 1:
            raise ValueError(f"num_pages must be >= 1, got {self.num_pages}")
        if self.memory_budget is not None and self.memory_budget <= 0:
            raise ValueError(f"memory_budget must be > 0, got {self.memory_budget}")
        if not 0.0 < self.memory_fraction <= 1.0:
            raise ValueError(f"memory_fraction must be in (0, 1], got {self.memory_fraction}")
        if self.max_running_reqs < 1:
            raise ValueError(f"max_running_reqs must be >= 1, got {self.max_running_reqs}")
        # 至少放得下 1 个提示 token 加 1 个生成的 token；0 不当成"不限"，那是 None 的意思
        if self.max_seq_len is not None and self.max_seq_len < 2:
            raise ValueError(f"max_seq_len must be >= 2, got {self.max_seq_len}")
        sizes = tuple(sorted(set(self.cuda_graph_batch_sizes)))
        if sizes and sizes[0] < 1:
            raise ValueError(f"cuda graph batch sizes must be >= 1, got {sizes}")
        self.cuda_graph_batch_sizes = sizes  # 排好序、去重：补齐时二分查找
