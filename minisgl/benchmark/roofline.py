"""屋顶线：这台设备的内存带宽和矩阵乘的速度，以及它们给每项测试定下的下限。

decode 每一步至少要把全部权重和这一批请求的 KV 读一遍；prefill 至少要做 ``2 × 参数量`` 次
浮点运算每个 token。一步的下限取"读完所需的时间"和"算完所需的时间"里大的那个。实测的用时
除以下限，就是离屋顶还有多远。
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from minisgl.models import ModelConfig, create_model

from .offline import Workload, timed

__all__ = [
    "DeviceRoof",
    "ModelCost",
    "measure_roof",
    "prefill_floor",
    "step_floor",
    "tpot_floor",
    "workload_floor",
]


@dataclass(frozen=True)
class DeviceRoof:
    copy_bytes_per_s: float  # 设备内拷贝：读 + 写的字节数 / 秒，当作内存能搬运的总带宽
    matmul_flops: float  # 方阵矩阵乘（给定的 dtype）每秒的浮点运算数


def _best_of(device: torch.device, fn: Callable[[], object], repeat: int) -> float:
    return min(timed(device, fn) for _ in range(repeat))


def measure_roof(device: torch.device, dtype: torch.dtype, big: bool) -> DeviceRoof:
    """实测。``big``：GPU 上用 1 GiB 的拷贝和 8192 的方阵；CPU 上小一些，免得等太久。"""
    numel = (1 << 29) if big else (1 << 24)  # bf16 时 1 GiB / 32 MiB
    src = torch.empty(numel, dtype=dtype, device=device).fill_(1)
    dst = torch.empty_like(src)
    seconds = _best_of(device, lambda: dst.copy_(src), 5)
    copy = 2 * src.numel() * src.element_size() / seconds
    n = 8192 if big else 512
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    seconds = _best_of(device, lambda: a @ b, 5)
    return DeviceRoof(copy_bytes_per_s=copy, matmul_flops=2 * n**3 / seconds)


@dataclass(frozen=True)
class ModelCost:
    """下限要用到的模型数字。矩阵乘的运算量分两部分：每个 token 都要过的各层（``body``），和只有
    要采样的 token 才算的 LM head——prefill 一段提示只在最后一个 token 上算它。注意力本身的
    运算量不算在内（上下文不长时是小头）。"""

    weight_bytes: int  # 一次前向要读的权重字节数（词嵌入和 LM head 绑定时只算一次）
    body_flops: int  # 每个 token：2 × 各层矩阵乘的参数量
    head_flops: int  # 每个采样的 token：2 × 词表大小 × 隐藏维度
    kv_bytes_per_token: int  # 每个 token 在所有层的 K 和 V

    @staticmethod
    def of(config: ModelConfig, dtype: torch.dtype) -> ModelCost:
        with torch.device("meta"):  # 只要形状：不分配内存
            model = create_model(config)
        state = model.state_dict()
        params = sum(t.numel() for t in state.values())
        head = config.vocab_size * config.hidden_size
        tables = sum(
            t.numel()
            for k, t in state.items()
            if k.endswith(("embed_tokens.weight", "lm_head.weight"))
        )
        size = torch.empty((), dtype=dtype).element_size()
        kv = 2 * config.num_layers * config.num_kv_heads * config.head_dim * size
        return ModelCost(params * size, 2 * (params - tables), 2 * head, kv)

    def flops(self, tokens: int, sampled: int) -> int:
        return tokens * self.body_flops + sampled * self.head_flops


def step_floor(cost: ModelCost, roof: DeviceRoof, new_tokens: int, kv_tokens: int) -> float:
    """一步 decode 的下限秒数：``new_tokens`` 个请求各一个新 token（都要采样），读
    ``kv_tokens`` 个 token 的 KV 和全部权重。"""
    read = cost.weight_bytes + kv_tokens * cost.kv_bytes_per_token
    compute = cost.flops(new_tokens, new_tokens) / roof.matmul_flops
    return max(read / roof.copy_bytes_per_s, compute)


def tpot_floor(
    cost: ModelCost, roof: DeviceRoof, clients: int, prompt_tokens: int, output_tokens: int
) -> float:
    """在线一档的 TPOT 下限（秒）：``clients`` 个请求同时开始、一起 decode，每个提示
    ``prompt_tokens`` 个 token、生成 ``output_tokens`` 个。第一个 token 算在 TTFT 里；之后第 k 步
    每个请求读 ``prompt_tokens + k`` 个 token 的 KV，TPOT 的下限是这些步的下限的平均。上下文比
    decode 那一行短时，多几个请求只多读几份短的 KV，下限之比也就更接近 1。"""
    if output_tokens < 2:
        raise ValueError(f"TPOT needs at least 2 output tokens, got {output_tokens}")
    steps = range(1, output_tokens)
    total = sum(step_floor(cost, roof, clients, clients * (prompt_tokens + k)) for k in steps)
    return total / len(steps)


def prefill_floor(cost: ModelCost, roof: DeviceRoof, requests: int, tokens: int) -> float:
    """``requests`` 段提示、共 ``tokens`` 个 token 的 prefill 的下限秒数（只看运算量）。"""
    return cost.flops(tokens, requests) / roof.matmul_flops


def workload_floor(cost: ModelCost, roof: DeviceRoof, work: Workload, max_batch: int) -> float:
    """整个离线负载的下限：所有 prefill 的运算量，加上 decode 每一步的下限（请求同时开始，
    最多 ``max_batch`` 个一起 decode，一个结束就补进下一个）。"""
    prefill = prefill_floor(cost, roof, len(work.prompts), work.input_tokens)
    pending = list(zip((len(p) for p in work.prompts), work.output_lens))
    live: list[list[int]] = []  # [已有的 token 数, 还要生成的 token 数]
    total = prefill
    while pending or live:
        while pending and len(live) < max_batch:  # 有空位就补进下一个请求
            n, out = pending.pop(0)
            if out > 1:  # prefill 已经生成了第 1 个 token
                live.append([n + 1, out - 1])
        if not live:
            continue
        total += step_floor(cost, roof, len(live), sum(r[0] for r in live))
        for r in live:
            r[0] += 1
            r[1] -= 1
        live = [r for r in live if r[1] > 0]  # 生成完的这一步就让出位置
    return total
