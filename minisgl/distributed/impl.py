"""张量并行的通信：``all_reduce`` 与 ``all_gather``。

张量并行（TP）时每个 rank 是一个进程，只持有每个权重矩阵的一片。大多数层各算各的，
只有两处需要交换数据：

- 行并行的线性层、词表并行的 embedding：每个 rank 算出一个**部分和**，``all_reduce`` 把
  所有 rank 的部分和加起来，每个 rank 都拿到完整的结果；
- LM head：每个 rank 算出自己那段词表的 logits，``all_gather`` 把各段按 rank 顺序拼起来。

tp=1 时两者都是恒等函数，单卡推理不需要初始化任何进程组。tp>1 时走 ``torch.distributed``
的默认进程组：GPU 上用 NCCL，CPU 上用 gloo——第 6 章用两个 CPU 进程跑通张量并行，靠的就是后者。
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .info import DistributedInfo, get_tp_info

__all__ = ["DistributedCommunicator"]


class DistributedCommunicator:
    """一个需要通信的层持有一个。建的时候记下 TP 信息，之后的调用都以它为准。

    为什么在构造时记下、而不是每次调用时再查：层的权重形状是按构造时的 TP 信息切的，
    通信必须和形状一致。如果中途有人改了全局 TP 信息，宁可在这里报错，也不要算出错的数。
    """

    def __init__(self, info: DistributedInfo | None = None) -> None:
        self.info = info if info is not None else get_tp_info()

    @property
    def size(self) -> int:
        return self.info.size

    def _check_group(self) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                f"tensor parallel size is {self.size} but torch.distributed is not initialized; "
                "call torch.distributed.init_process_group first"
            )
        world = dist.get_world_size()
        if world != self.size or dist.get_rank() != self.info.rank:
            raise RuntimeError(
                f"tp info (rank {self.info.rank} of {self.size}) does not match the process group "
                f"(rank {dist.get_rank()} of {world})"
            )

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """所有 rank 的 ``x`` 逐元素相加。**原地**进行：返回的就是 ``x`` 本身。"""
        if self.size == 1:
            return x
        self._check_group()
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        return x

    def all_gather(self, x: torch.Tensor, dim: int = -1) -> torch.Tensor:
        """把所有 rank 的 ``x`` 沿 ``dim`` 按 rank 顺序拼接：形状 ``(…, n, …) -> (…, n * tp, …)``。

        各 rank 的 ``x`` 形状必须相同。返回新张量，``x`` 不变。
        """
        if self.size == 1:
            return x
        self._check_group()
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.size)]
        dist.all_gather(parts, x)
        return torch.cat(parts, dim=dim)
