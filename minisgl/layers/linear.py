"""线性层：复制、列并行、行并行，以及把几个投影合成一个矩阵乘的"合并列并行"。

约定和 ``F.linear`` 一样：``weight`` 的形状是 ``(输出维, 输入维)``，``y = x @ weight.T + bias``。
层里放的是**本 rank 的那一片**权重，形状由完整尺寸和 TP 信息算出来；切片、合并由第 2 章的
加载器完成，层只负责"按这个形状占位"和"拿这片权重算"。

张量并行的两种切法（tp 是 rank 数）：

- **列并行**：按输出维切，rank r 持有 ``weight`` 的第 r 段行。输入完整，输出是完整输出的第 r 段，
  不需要通信。qkv、gate_up 用它。
- **行并行**：按输入维切，rank r 持有 ``weight`` 的第 r 段列，输入也只是第 r 段。每个 rank 得到
  完整形状的**部分和**，``all_reduce`` 相加之后才是结果。o_proj、down_proj 用它。

列并行接行并行（qkv → 注意力 → o_proj，gate_up → 激活 → down_proj）时，中间的激活天然就是
按段切开的，整个块只在最后通信一次。
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minisgl.distributed import DistributedCommunicator, get_tp_info
from minisgl.utils import div_even

from .base import BaseOP

__all__ = [
    "LinearColParallelMerged",
    "LinearQKVMerged",
    "LinearReplicated",
    "LinearRowParallel",
]


# >> ch19
from minisgl.kernel.ops import linear


# << ch19
class _Linear(BaseOP):
    """按本地形状占位的线性层。``torch.empty`` 跟随默认的设备和 dtype（第 5 章在 meta 上建）。"""

    def __init__(self, local_input_size: int, local_output_size: int, bias: bool) -> None:
        self.weight = torch.empty(local_output_size, local_input_size)
        self.bias = torch.empty(local_output_size) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # >> ch19
        if x.is_cuda:  # decode 的几行 x：GPU 上换成按带宽写的 GEMV（第 19 章），由 ops.linear 挑
            return linear(x, self.weight, self.bias)

        # << ch19
        return F.linear(x, self.weight, self.bias)


class LinearReplicated(_Linear):
    """不切：每个 rank 都持有完整的权重。用于很小的矩阵，比如 MoE 的路由器。"""

    def __init__(self, input_size: int, output_size: int, bias: bool = False) -> None:
        super().__init__(input_size, output_size, bias)


class LinearColParallelMerged(_Linear):
    """几个输入相同的投影合成一个列并行矩阵，比如 MLP 的 ``gate_up_proj = [gate; up]``。

    每个投影各自按 tp 均分；本 rank 的权重是"gate 的第 r 段"接"up 的第 r 段"，
    而不是 ``[gate; up]`` 整体的第 r 段——否则 tp=2 时 rank 0 拿到全部 gate、rank 1 拿到全部 up，
    激活函数就没法在本地算了。
    """

    def __init__(self, input_size: int, output_sizes: list[int], bias: bool = False) -> None:
        tp = get_tp_info().size
        self.output_sizes = list(output_sizes)
        self.local_output_sizes = [div_even(n, tp) for n in output_sizes]
        super().__init__(input_size, sum(self.local_output_sizes), bias)


class LinearQKVMerged(_Linear):
    """注意力的 q、k、v 三个投影合成一个：输出依次是本 rank 的 q 头、k 头、v 头。

    Q 头按 tp 均分。KV 头比 rank 少时（GQA 常见：2 个 KV 头、tp=4）没法再分，每个 rank 放
    一个完整的 KV 头，相邻的 ``tp // KV头数`` 个 rank 共用同一个头的副本：rank r 拿第
    ``r * KV头数 // tp`` 个——它恰好是 rank r 上那些 Q 头所属的组。
    """

    def __init__(
        self,
        hidden_size: int,
        head_dim: int,
        num_qo_heads: int,
        num_kv_heads: int,
        bias: bool = False,
    ) -> None:
        tp = get_tp_info().size
        self.head_dim = head_dim
        self.local_num_qo_heads = div_even(num_qo_heads, tp)
        self.local_num_kv_heads = div_even(num_kv_heads, tp, allow_replicate=True)
        q = self.local_num_qo_heads * head_dim
        kv = self.local_num_kv_heads * head_dim
        self.local_output_sizes = [q, kv, kv]
        super().__init__(hidden_size, q + 2 * kv, bias)


class LinearRowParallel(_Linear):
    """按输入维切的线性层：本地矩阵乘得到部分和，``all_reduce`` 之后才是完整结果。

    偏置只能加一次：如果每个 rank 都在部分和上加 bias，all_reduce 之后就加了 tp 次。
    所以偏置在通信之后再加（每个 rank 持有同一份完整的 bias）。
    """

    def __init__(self, input_size: int, output_size: int, bias: bool = False) -> None:
        tp = get_tp_info().size
        super().__init__(div_even(input_size, tp), output_size, bias)
        self._comm = DistributedCommunicator()

    def forward_local(self, x: torch.Tensor) -> torch.Tensor:
        """本 rank 的部分和（不通信、不加偏置）。单进程里模拟 TP 时直接调用它。"""
        # >> ch19
        if x.is_cuda:  # decode 的几行 x：GPU 上换成按带宽写的 GEMV（第 19 章），由 ops.linear 挑
            return linear(x, self.weight)

        # << ch19
        return F.linear(x, self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self._comm.all_reduce(self.forward_local(x))
        return y if self.bias is None else y + self.bias
