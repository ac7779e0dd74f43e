"""纯 PyTorch 的 MoE 后端：softmax → top-k →（可选）重新归一化 → 按专家分组 → 逐个专家算
→ 加权求和。

一个批次有 ``T`` 个 token，每个选 ``k`` 个专家，一共 ``T·k`` 个 (token, 专家) 对。最直接的写法是
对每个 token、每个选中的专家各做一次小矩阵乘——``T·k`` 次矩阵-向量乘，又慢又碎。
反过来按专家分组：把选了专家 ``e`` 的 token 收到一起，对专家 ``e`` 做**一次**矩阵乘，
循环只有 ``E`` 圈，而且每圈是真正的矩阵乘。官方的 Triton 后端做的是同一件事
（``moe_align_block_size`` 就是分组），只是把分组和 ``E`` 次矩阵乘融合进了一个 kernel。

没有被任何 token 选中的专家直接跳过——批次小的时候（decode 一次只有几个 token）这很常见。
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minisgl.layers.activation import get_act_and_mul

from . import BaseMoeBackend

__all__ = ["NativeMoeBackend", "group_by_expert", "moe_forward", "select_experts"]


def select_experts(
    router_logits: torch.Tensor, top_k: int, renormalize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """路由：``(T, E)`` 的打分 → 每个 token 的 ``(权重, 专家编号)``，各 ``(T, k)``。

    权重是 softmax 之后的概率（float32：bf16 的概率只有 3 位有效数字，排序都可能排错），
    按从大到小排列。``renormalize`` 时把选出的 k 个概率除以它们的和——Qwen3-MoE 的
    ``norm_topk_prob``：不除的话，k 个专家的权重之和小于 1，输出整体偏小。
    """
    probs = torch.softmax(router_logits, dim=-1, dtype=torch.float32)
    weights, ids = probs.topk(top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


def group_by_expert(topk_ids: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """把 ``T·k`` 个 (token, 专家) 对按专家排好：返回 ``(order, counts)``。

    - ``order``：``(T·k,)``，``topk_ids.flatten()`` 的下标，按专家编号稳定排序——同一个专家的
      对排在一起，组内保持 token 的先后顺序。第 ``j`` 个对属于第 ``order[j] // k`` 个 token；
    - ``counts``：``(E,)``，每个专家分到几个 token（可以是 0）。

    例：``topk_ids = [[2, 0], [0, 1], [2, 1]]``（3 个 token，k=2），展平是 ``[2, 0, 0, 1, 2, 1]``，
    ``order = [1, 2, 3, 5, 0, 4]``，``counts = [2, 2, 2, 0]``（E=4，专家 3 没有 token）。
    """
    flat = topk_ids.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=num_experts)
    return order, counts


def moe_forward(
    x: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    activation: str = "silu",
) -> torch.Tensor:
    """给定路由结果，算出 ``sum_j 权重_j · 专家_{id_j}(x)``：``(T, H)``，dtype 与 ``x`` 相同。

    加权求和在 float32 里累加：一个 token 的 k 个专家输出先加在一起，最后才转回 ``x`` 的 dtype。
    """
    num_experts, top_k = gate_up.shape[0], topk_ids.shape[-1]
    act_and_mul = get_act_and_mul(activation)
    order, counts = group_by_expert(topk_ids, num_experts)
    token_of = order // top_k  # 排好序的第 j 个对属于哪个 token
    weight_of = topk_weights.flatten()[order]  # 以及它的路由权重
    out = torch.zeros(x.shape[0], down.shape[1], dtype=torch.float32, device=x.device)
    start = 0
    for e, n in enumerate(counts.tolist()):  # tolist() 把 E 个计数拷回主机：循环要在主机上决定
        if n == 0:
            continue  # 没有 token 选这个专家：跳过，不做空的矩阵乘
        rows = token_of[start : start + n]
        h = act_and_mul(F.linear(x[rows], gate_up[e]))  # (n, 2·I) -> (n, I)
        y = F.linear(h, down[e])  # (n, H)
        # index_add_：同一个 token 在 k 个专家那里的输出加到同一行
        # （top-k 选出的专家互不相同，一个 token 在一个专家的组里最多出现一次）
        out.index_add_(0, rows, y.float() * weight_of[start : start + n, None])
        start += n
    return out.to(x.dtype)


class NativeMoeBackend(BaseMoeBackend):
    """``select_experts`` + ``moe_forward``。张量并行时 ``gate_up``、``down`` 只是每个专家中间维度的
    一段，算出来的就是部分和——路由不受影响，通信由 ``MoELayer`` 负责。"""

    syncs_host = True  # moe_forward 里的 counts.tolist()

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
        weights, ids = select_experts(router_logits, top_k, renormalize)
        return moe_forward(hidden_states, gate_up, down, weights, ids, activation)
