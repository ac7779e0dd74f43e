"""decode 的 CUDA Graph：把一整步 decode 的几百个 kernel 录成一张图，之后一次提交。

decode 每步每个请求只算 1 个 token，GPU 上每个 kernel 都很短，CPU 逐个发射 kernel 的开销
反而成了瓶颈。CUDA Graph 把"发射哪些 kernel、读写哪些地址"录下来，重放时一次提交。
代价是图里的一切都是固定的：

- **形状固定**：每个批大小录一张图。真实批大小向上补齐到最近的一档（``padded_batch_size``），
  补出来的假请求读写"哑页"，算出来的 logits 扔掉；
- **地址固定**：输入（token、位置、写入槽位、注意力元数据）放在事先分配好的静态张量里，
  重放前原地拷进去；输出也在图自己的内存里，重放后切出前 ``bs`` 行；
- **不能有主机同步**：图里不能有 ``.item()``、``.tolist()``，也不能有按请求的 Python 循环——
  所以注意力后端要提供一条"整批一次算"的 decode 路径（``make_graph_metadata`` 等三个方法）。

图只在 CUDA 上有（``utils.device.cuda_graph_available``）。别的设备上 ``GraphRunner`` 是关着的：
``can_run`` 永远返回 False，Engine 每步都即时执行，代码不用分两套。
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import torch

from minisgl.core import Batch, Context, Req
from minisgl.moe import MoELayer
from minisgl.utils import cuda_graph_available, init_logger

if TYPE_CHECKING:
    from minisgl.models.base import BaseLLMModel

__all__ = [
    "GraphRunner",
    "capture_blocker",
    "capture_graph",
    "host_synced_layers",
    "padded_batch_size",
]

logger = init_logger(__name__)

_GRAPH_HOOKS = ("make_graph_metadata", "fill_graph_metadata", "reset_graph_metadata")


def padded_batch_size(bs: int, batch_sizes: Sequence[int]) -> int | None:
    """``batch_sizes``（升序）里不小于 ``bs`` 的最小一档；比最大一档还大时返回 None（即时执行）。"""
    if bs < 1:
        raise ValueError(f"batch size must be >= 1, got {bs}")
    i = bisect.bisect_left(batch_sizes, bs)
    return batch_sizes[i] if i < len(batch_sizes) else None


def host_synced_layers(model: BaseLLMModel) -> list[str]:
    """前向里要等 GPU 把数据拷回主机的层（全名）：录制时遇到这种同步，捕获直接失败。
    目前只有 MoE 层的 torch 后端（第 6 章：按每个专家分到的 token 数在主机上循环）。"""
    owners = (
        name.rsplit(".", 1)[0]  # 张量的全名去掉最后一段，就是持有它的层
        for name, owner, _, _ in model.named_tensors()
        if isinstance(owner, MoELayer) and owner.syncs_host
    )
    return list(dict.fromkeys(owners))  # 一层有两个张量：去重，保持层的顺序


def capture_blocker(
    model: BaseLLMModel, ctx: Context, device: torch.device, hooks: Sequence[str]
) -> str:
    """录不了图的原因，空串表示能录：不是 CUDA；注意力后端缺少 ``hooks`` 里的方法（图里要一条
    "整批一次算"、没有主机同步的路径）；模型的前向里要同步主机。"""
    if not cuda_graph_available(device):
        return f"not available on {device.type}"
    backend = ctx.attn_backend
    if not all(hasattr(backend, h) for h in hooks):
        return f"attention backend {type(backend).__name__} cannot be captured"
    if synced := host_synced_layers(model):
        return f"{len(synced)} layers sync with the host, e.g. {synced[0]}"
    return ""


def capture_graph(
    run: Callable[[], torch.Tensor], device: torch.device, pool: tuple[int, int]
) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """把 ``run()`` 录成一张图（内存从 ``pool`` 里拿），返回图和它的输出：图内存里的张量，
    每次重放都写在这里。录之前先在旁路流上即时跑一遍：第一次调用某些算子时的懒初始化（cuBLAS
    句柄、工作区）不能发生在捕获期间。"""
    stream = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(stream)
    with torch.cuda.stream(side):
        run()
    stream.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = run()
    return graph, out


class GraphRunner:
    """为 ``batch_sizes`` 里的每一档录一张 decode 图；``can_run`` / ``replay`` 供 Engine 调用。"""

    def __init__(
        self,
        model: BaseLLMModel,
        ctx: Context,
        *,
        batch_sizes: Sequence[int],
        device: torch.device,
        dummy_page: int,
    ) -> None:
        self.model = model
        self.ctx = ctx
        self.device = torch.device(device)
        # 一档也不能比页表的行数多：补齐后的假请求也要占页表的"行"（虽然只读哑页）
        max_rows = ctx.page_table.shape[0]
        self.batch_sizes = sorted({b for b in batch_sizes if 1 <= b <= max_rows})
        self.dummy_slot = dummy_page * ctx.page_size
        self.reason = "no batch sizes"
        if self.batch_sizes:
            self.reason = capture_blocker(model, ctx, self.device, _GRAPH_HOOKS)
        self.enabled = not self.reason
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        if self.enabled:
            self.allocate_static(max(self.batch_sizes))
            self._capture_all()

    def describe(self) -> str:
        if not self.enabled:
            return f"off ({self.reason})"
        return f"on, batch sizes {self.batch_sizes}"

    # ------------------------------------------------------------ 静态输入

    def allocate_static(self, max_bs: int) -> None:
        """所有档位共用一套静态输入：小档用前几行。"""
        device = self.device
        self.input_ids = torch.zeros(max_bs, dtype=torch.int32, device=device)
        self.positions = torch.zeros(max_bs, dtype=torch.int32, device=device)
        self.out_loc = torch.full((max_bs,), self.dummy_slot, dtype=torch.int32, device=device)
        self.meta = self.ctx.attn_backend.make_graph_metadata(max_bs)  # type: ignore[attr-defined]

    def static_batch(self, bs: int) -> Batch:
        """一个由 ``bs`` 个假请求组成、字段指向静态张量前 ``bs`` 行的 decode 批次。"""
        dummies = [Req(torch.zeros(1, dtype=torch.int32), table_idx=0) for _ in range(bs)]
        batch = Batch(dummies, "decode")
        batch.input_ids = self.input_ids[:bs]
        batch.positions = self.positions[:bs]
        batch.out_loc = self.out_loc[:bs]
        batch.attn_metadata = self.meta
        return batch

    def fill(self, batch: Batch, padded_bs: int) -> None:
        """把真实批次拷进静态张量的前 ``bs`` 行，``bs .. padded_bs-1`` 行填假请求。"""
        bs = batch.size
        self.input_ids[:bs].copy_(batch.input_ids)
        self.positions[:bs].copy_(batch.positions)
        self.out_loc[:bs].copy_(batch.out_loc)
        if padded_bs > bs:  # 空切片上的 fill_ 也要在主机上花几微秒：batch 正好是一档时不调
            self.input_ids[bs:padded_bs].fill_(0)
            self.positions[bs:padded_bs].fill_(0)
            self.out_loc[bs:padded_bs].fill_(self.dummy_slot)
        self.ctx.attn_backend.fill_graph_metadata(  # type: ignore[attr-defined]
            self.meta, batch, padded_bs, self.dummy_slot
        )

    def run_static(self, bs: int) -> torch.Tensor:
        """在静态张量上即时跑一次前 ``bs`` 行（捕获前的预热；CPU 上的测试也用它）。"""
        batch = self.static_batch(bs)
        with self.ctx.forward_batch(batch):
            return self.model.forward()

    # ------------------------------------------------------------ 捕获与重放

    def _capture_all(self) -> None:
        pool = torch.cuda.graph_pool_handle()
        # 从大到小捕获：大图先占好内存池，小图复用其中的块
        for bs in reversed(self.batch_sizes):
            self.out_loc[:bs].fill_(self.dummy_slot)
            # 元数据长什么样由后端决定：让它自己把前 bs 行填成假请求
            self.ctx.attn_backend.reset_graph_metadata(  # type: ignore[attr-defined]
                self.meta, bs, self.dummy_slot
            )
            self.graphs[bs] = capture_graph(partial(self.run_static, bs), self.device, pool)
        torch.cuda.synchronize(self.device)
        logger.info(f"captured cuda graphs for decode batch sizes {self.batch_sizes}")

    def can_run(self, batch: Batch) -> bool:
        return (
            self.enabled
            and batch.is_decode
            and padded_batch_size(batch.size, self.batch_sizes) is not None
        )

    def replay(self, batch: Batch) -> torch.Tensor:
        """拷入输入、重放、切出前 ``bs`` 行 logits。返回的是图内存的视图：下一次重放会覆盖它，
        调用方在那之前用完（Engine 紧接着就采样）。"""
        padded = padded_batch_size(batch.size, self.batch_sizes)
        if not self.can_run(batch) or padded is None:
            raise RuntimeError(f"cannot replay a cuda graph for {batch}")
        graph, logits = self.graphs[padded]
        self.fill(batch, padded)
        graph.replay()
        return logits[: batch.size]

    def destroy(self) -> None:
        self.graphs.clear()
