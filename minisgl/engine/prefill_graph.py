"""prefill 的 CUDA Graph：按 token 数分几档，每档把一整步 prefill 录成一张图。

第 7 章录 decode，是因为 decode 的 kernel 很短，主机逐个发射跟不上 GPU。prefill 的 kernel 长得多，
可一步也有几百个：H200 上 16,384 个 token 的一步，GPU 算 32 毫秒左右，慢一些的主机逐个发射这几百个
kernel 也要二十多毫秒；再加上前后准备批次、处理结果，GPU 有三四成的时间在等主机。录成图之后，
主机每一步只做几次拷贝、一次重放，准备下一批的时间就能藏进 GPU 算这一批的时间里。

和 decode 的图一样，形状、地址都是固定的：

- **token 数**向上补齐到最近的一档（``prefill_graph_token_counts``）。补出来的 token 不属于任何
  请求：读 token 0、K/V 写进哑页，算出来的行没人要；
- **请求数**固定为页表的行数：多出来的请求没有新 token，LM head 取的那一行也会被扔掉；
- **注意力的网格**是工作表的长度（``attention.triton_attn.extend_work``）：补到这一档最多可能有的
  块数，补出来的工作项一开始就返回。所以只有提供了 ``PREFILL_GRAPH_HOOKS`` 的后端能录。

每一档的图占着它自己的激活内存；几张图共用一个内存池，从大到小录，小图复用大图的块。
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import torch

from minisgl.core import Batch, Context, Req
from minisgl.kernel import ops
from minisgl.utils import init_logger

from .graph import capture_blocker, capture_graph

if TYPE_CHECKING:
    from minisgl.models.base import BaseLLMModel

__all__ = ["PREFILL_GRAPH_HOOKS", "PrefillGraphRunner", "prefill_graph_token_counts"]

logger = init_logger(__name__)

PREFILL_GRAPH_HOOKS = ("make_prefill_graph_metadata", "fill_prefill_graph_metadata")


def prefill_graph_token_counts(max_tokens: int) -> tuple[int, ...]:
    """录哪几档：512、1024、2048，之后每 2048 一档，最后一档正好是 ``max_tokens``。

    小的几档翻倍：几百个 token 的一步，GPU 只算一两毫秒，多算一倍也比等主机发射快；大的几档补齐
    最多多算 2047 个 token（16,384 个 token 的一步的八分之一），档位也不至于太多。"""
    if max_tokens < 1:
        return ()
    counts = {512, 1024, 2048, *range(4096, max_tokens, 2048)}
    return tuple(sorted({n for n in counts if n < max_tokens} | {max_tokens}))


class PrefillGraphRunner:
    """为 ``token_counts`` 里的每一档录一张 prefill 图；``can_run`` / ``replay`` 供 Engine 调用。"""

    def __init__(
        self,
        model: BaseLLMModel,
        ctx: Context,
        *,
        token_counts: Sequence[int],
        device: torch.device,
        dummy_page: int,
    ) -> None:
        self.model = model
        self.ctx = ctx
        self.device = torch.device(device)
        self.token_counts = sorted(set(token_counts))
        self.max_reqs = ctx.page_table.shape[0]  # 一步里的请求数不会超过页表的行数
        self.dummy_slot = dummy_page * ctx.page_size
        self.reason = "no token counts"
        if self.token_counts:
            self.reason = capture_blocker(model, ctx, self.device, PREFILL_GRAPH_HOOKS)
        self.enabled = not self.reason
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        if self.enabled:
            self.allocate_static()
            self._capture_all()

    def describe(self) -> str:
        if not self.enabled:
            return f"off ({self.reason})"
        return f"on, token counts {self.token_counts}"

    def padded_tokens(self, num_tokens: int) -> int | None:
        """不少于 ``num_tokens`` 的最小一档；比最大一档还多时返回 None（即时执行）。"""
        i = bisect.bisect_left(self.token_counts, num_tokens)
        return self.token_counts[i] if i < len(self.token_counts) else None

    # ------------------------------------------------------------ 静态输入

    def allocate_static(self) -> None:
        """各档共用输入张量（小档用前几行）；注意力元数据每档一份：工作表的长度随档位变。"""
        n, device = max(self.token_counts), self.device
        self.input_ids = torch.zeros(n, dtype=torch.int32, device=device)
        self.positions = torch.zeros(n, dtype=torch.int32, device=device)
        self.out_loc = torch.full((n,), self.dummy_slot, dtype=torch.int32, device=device)
        backend = self.ctx.attn_backend
        self.meta = {
            t: backend.make_prefill_graph_metadata(self.max_reqs, t)  # type: ignore[attr-defined]
            for t in self.token_counts
        }

    def static_batch(self, num_tokens: int) -> Batch:
        """``max_reqs`` 个假请求组成的 prefill 批次，字段指向静态张量的前 ``num_tokens`` 个。"""
        dummy = torch.zeros(1, dtype=torch.int32)
        batch = Batch([Req(dummy, table_idx=0) for _ in range(self.max_reqs)], "prefill")
        batch.input_ids = self.input_ids[:num_tokens]
        batch.positions = self.positions[:num_tokens]
        batch.out_loc = self.out_loc[:num_tokens]
        batch.attn_metadata = self.meta[num_tokens]
        return batch

    def fill(self, batch: Batch, num_tokens: int) -> None:
        """真实批次拷进静态张量的前 ``T`` 个位置，``T .. num_tokens-1`` 填补齐的 token。"""
        t = batch.input_ids.shape[0]
        self.input_ids[:t].copy_(batch.input_ids)
        self.positions[:t].copy_(batch.positions)
        self.out_loc[:t].copy_(batch.out_loc)
        if num_tokens > t:
            self.input_ids[t:num_tokens].fill_(0)
            self.positions[t:num_tokens].fill_(0)
            self.out_loc[t:num_tokens].fill_(self.dummy_slot)
        self.ctx.attn_backend.fill_prefill_graph_metadata(  # type: ignore[attr-defined]
            self.meta[num_tokens], batch
        )

    def run_static(self, num_tokens: int) -> torch.Tensor:
        """在静态张量上即时跑一次这一档（捕获前的预热；CPU 上的测试也用它）。返回每个请求
        （包括补出来的）一行 logits。"""
        batch = self.static_batch(num_tokens)
        with self.ctx.forward_batch(batch):
            return self.model.forward()

    # ------------------------------------------------------------ 捕获与重放

    def _capture_all(self) -> None:
        pool = torch.cuda.graph_pool_handle()
        # 依赖启动只给 decode 的小 kernel：prefill 的大 kernel 上反而慢（``dependent_launch``）
        with ops.without_dependent_launch():
            for n in reversed(self.token_counts):  # 从大到小：大图先占好内存池
                self.graphs[n] = capture_graph(partial(self.run_static, n), self.device, pool)
        torch.cuda.synchronize(self.device)
        logger.info(f"captured cuda graphs for prefill token counts {self.token_counts}")

    def can_run(self, batch: Batch) -> bool:
        return (
            self.enabled
            and batch.is_prefill
            and batch.size <= self.max_reqs
            and self.padded_tokens(batch.num_tokens) is not None
        )

    def replay(self, batch: Batch) -> torch.Tensor:
        """拷入输入、重放、切出前 ``bs`` 行 logits（图内存的视图，下一次重放前用完）。"""
        padded = self.padded_tokens(batch.num_tokens)
        if not self.can_run(batch) or padded is None:
            raise RuntimeError(f"cannot replay a prefill cuda graph for {batch}")
        graph, logits = self.graphs[padded]
        self.fill(batch, padded)
        graph.replay()
        return logits[: batch.size]

    def destroy(self) -> None:
        self.graphs.clear()
