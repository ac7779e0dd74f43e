"""混合专家（MoE）：专家的权重（``MoELayer``）和"路由之后怎么算"的后端（``BaseMoeBackend``）。

稠密模型的每一层只有一个 MLP，每个 token 都要过它。MoE 层有 ``E`` 个一样形状的小 MLP（专家）
和一个路由器：路由器给每个 token 打 ``E`` 个分，每个 token 只送进分数最高的 ``k`` 个专家
（Qwen3-30B-A3B 是 128 选 8），输出是这 ``k`` 个专家的输出按路由权重的加权和。参数量是
``E`` 个 MLP，每个 token 的计算量只有 ``k`` 个——模型"大"，但算得"少"。

拆成两半，是因为两半变化的原因不同：

- ``MoELayer`` 持有一层全部专家的权重：第 2 章的加载器已经把它们按编号叠成两个三维张量
  ``gate_up_proj (E, 2·I/tp, H)`` 和 ``down_proj (E, H, I/tp)``。张量并行切的是**每个专家的
  中间维度**，和稠密 MLP 一样"列并行接行并行"，所以每个 rank 算出的是部分和，最后
  ``all_reduce`` 一次；
- 后端只管计算：给定 token、权重和路由器的打分，返回本 rank 的部分和。这里只有一个纯 PyTorch 的
  后端 ``torch``（``native.py``，按专家分组、逐个专家做矩阵乘），在 CPU 上就能跑；
  融合的 GPU kernel（比如官方用 Triton 写的 ``fused``：top-k、分组和两次矩阵乘都融合）可以在这里
  再登记一个，``MoELayer`` 一行不改。
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

import torch

from minisgl.distributed import DistributedCommunicator, get_tp_info
from minisgl.layers.base import BaseOP
from minisgl.utils import Registry, div_even

__all__ = [
    "SUPPORTED_MOE_BACKENDS",
    "BaseMoeBackend",
    "MoELayer",
    "create_moe_backend",
]


class BaseMoeBackend(ABC):
    """路由之后的全部计算：选专家、按专家分组、专家的 MLP、加权求和。不做任何通信。"""

    # 前向里要不要等 GPU 把数据拷回主机（按每个专家分到的 token 数在主机上决定循环）。要等的后端
    # 录不进 CUDA Graph（第 7 章），Engine 见到它就不录；整批都在 GPU 上决定的融合 kernel 设成 False
    syncs_host: bool = True

    @abstractmethod
    def forward(
        self,
        hidden_states: torch.Tensor,
        gate_up: torch.Tensor,
        down: torch.Tensor,
        router_logits: torch.Tensor,
        top_k: int,
        renormalize: bool,
        activation: str,
    ) -> torch.Tensor:
        """本 rank 的部分和 ``(T, H)``，dtype 与 ``hidden_states`` 相同。

        - ``hidden_states``：``(T, H)``，每个 token 一行；
        - ``gate_up``：``(E, 2·I_local, H)``，第 ``e`` 个是专家 ``e`` 的 gate 行接 up 行；
        - ``down``：``(E, H, I_local)``；
        - ``router_logits``：``(T, E)``，路由器的打分（softmax 之前）；
        - ``top_k``：每个 token 送进几个专家；``renormalize``：选出的 k 个权重是否重新归一化
          到和为 1（config.json 的 ``norm_topk_prob``）；``activation``：``hidden_act``。
        """


MoeBackendCreator = Callable[[], BaseMoeBackend]

SUPPORTED_MOE_BACKENDS: Registry[MoeBackendCreator] = Registry("MoE backend")


@SUPPORTED_MOE_BACKENDS.register("torch")
def create_native_backend() -> BaseMoeBackend:
    # 用到时才导入：native.py 要从这里导入 BaseMoeBackend，放在文件顶部会循环导入
    from .native import NativeMoeBackend

    return NativeMoeBackend()


def create_moe_backend(name: str = "auto") -> BaseMoeBackend:
    """按名字建后端（命令行上的 ``--moe-backend``）。``auto`` 选当前最好的——现在只有 ``torch``。"""
    if name == "auto":
        name = "torch"
    return SUPPORTED_MOE_BACKENDS.get(name)()


class MoELayer(BaseOP):
    """一层的全部专家。状态字典里只有两个张量：``gate_up_proj`` 和 ``down_proj``
    （在模型里的全名是 ``model.layers.{i}.mlp.experts.gate_up_proj`` 等，
    和第 2 章加载器交出的一致）。

    路由器不在这里：它是一个普通的复制线性层（``mlp.gate``），由外层的 MoE 块持有
    （``models/utils.py`` 的 ``MoEMLP``）。这样这一层只回答一个问题：
    "给定打分，专家们的输出是什么"。
    """

    def __init__(
        self,
        num_experts: int,
        top_k: int,
        hidden_size: int,
        intermediate_size: int,
        *,
        renormalize: bool,
        hidden_act: str = "silu",
        backend: str | BaseMoeBackend = "auto",
    ) -> None:
        if not 0 < top_k <= num_experts:
            raise ValueError(f"top_k must be in [1, num_experts={num_experts}], got {top_k}")
        tp = get_tp_info()
        self.num_experts = num_experts
        self.top_k = top_k
        self.renormalize = renormalize
        self.hidden_act = hidden_act
        local = div_even(intermediate_size, tp.size)  # 每个专家的中间维度按 tp 均分
        self.gate_up_proj = torch.empty(num_experts, 2 * local, hidden_size)
        self.down_proj = torch.empty(num_experts, hidden_size, local)
        self._backend = create_moe_backend(backend) if isinstance(backend, str) else backend
        self._comm = DistributedCommunicator(tp)

    @property
    def syncs_host(self) -> bool:
        return self._backend.syncs_host

    def forward_local(self, x: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        """本 rank 的部分和：只用了每个专家中间维度的这一段。"""
        return self._backend.forward(
            x,
            self.gate_up_proj,
            self.down_proj,
            router_logits,
            self.top_k,
            self.renormalize,
            self.hidden_act,
        )

    def forward(self, x: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        """``x``：``(T, H)``；``router_logits``：``(T, E)``。返回 ``(T, H)``。

        各 rank 的路由结果必须一致：路由器是复制的，输入 ``x`` 在各 rank 上逐位相同（它来自
        上一次 all_reduce），所以每个 rank 选出的专家和权重都一样，部分和才能直接相加。
        """
        return self._comm.all_reduce(self.forward_local(x, router_logits))
