"""调度器：一个 rank 上的主循环。收请求 → 组批 → 前向 → 处理结果，周而复始。

每一步只做一种批次：能接纳新请求就 prefill，否则把所有运行中的请求一起 decode。请求随时
加入、随时离开，批次每一步都不一样——这就是连续批处理。
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from minisgl.attention import prepare_batch
from minisgl.core import Batch
from minisgl.engine import Engine
from minisgl.kvcache import create_prefix_cache
from minisgl.utils import init_logger, read_eos_token_ids

from .cache import CacheManager
from .config import SchedulerConfig
from .decode import DecodeManager
from .io import ExitReq, LocalIO, SchedulerCommand, SchedulerIO
from .prefill import PrefillManager
from .table import ReqTable
from .utils import PendingReq, SchedReq, TokenOutput

__all__ = ["ForwardOutput", "Scheduler"]

# >> ch19
import time

# << ch19
# >> ch11
from minisgl.env import ENV
from minisgl.utils import Event, new_event, new_stream, pin_memory, stream_context
from minisgl.utils.device import ints_to_device, to_device

from .utils import AbortReq

# << ch11
logger = init_logger(__name__)


# >> ch17
import math
import numbers

from minisgl.core import SamplingParams


def _bad_sampling_type(params: SamplingParams) -> str | None:
    """采样参数的类型和有限性。HTTP 的请求模型早就把关了（第 15、16 章）；离线的 ``LLM`` 直接收
    ``SamplingParams``，``temperature=nan``、``max_tokens="5"`` 这样的值要在这里拦下：不然它们
    到了采样器里才出错，出错的那一步正拿着这个请求的行和页，一个坏请求就漏掉一份资源。NumPy 的
    数也算（``numbers`` 的抽象类认得它们）。"""
    for name in ("temperature", "top_p"):
        value = getattr(params, name)
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
        ):
            return f"{name} must be a finite number, got {value!r}"
    for name in ("top_k", "max_tokens"):
        value = getattr(params, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return f"{name} must be an integer, got {value!r}"
    return None


# << ch17
# >> ch14
import hashlib
from collections import deque
from dataclasses import replace

import torch.distributed as dist

from minisgl.distributed import cpu_group, get_tp_info, init_distributed
from minisgl.utils import pick_device

from .io import ZmqIO


# << ch14
@dataclass
class ForwardOutput:
    """一次前向发出去之后留下的东西：哪一批，采样出的 token 正在拷回主机。"""

    batch: Batch
    next_tokens: torch.Tensor  # (bs,) 主机上的张量
    # >> ch09
    # 发出前向那一刻还没算完的分块（uid）：它们的 token 丢掉。在这里记下来，而不是处理结果时
    # 再看请求的状态：重叠调度处理结果晚一步，那时这个请求可能已经排进了下一块
    chunked: frozenset[int] = frozenset()
    # << ch09
    # >> ch11
    copy_done: Event | None = None  # 重叠调度时拷回主机的事件，处理结果之前先等它；None：已经拷完
    # << ch11


class Scheduler:
    def __init__(self, config: SchedulerConfig, io: SchedulerIO | None = None) -> None:
        self.config = config
        # >> ch14
        info = config.tp_info
        if info.size > 1 and not dist.is_initialized():  # 启动器拉起的进程：自己加入进程组
            if config.dist_init_addr is None:
                raise ValueError("tp > 1 needs dist_init_addr (or an initialized process group)")
            device = pick_device(config.device)
            init_distributed(info.rank, info.size, init_method=config.dist_init_addr, device=device)
        # << ch14
        self.engine = Engine(config)
        # >> ch14
        if io is None and config.zmq_backend_addr is not None:  # 配了 ZMQ 地址就是多进程服务
            io = ZmqIO(config)
        # << ch14
        self.io = io if io is not None else LocalIO()
        # >> ch14
        # 每一步的调度决策（阶段、uid、新 token 数）汇成一个摘要：各 rank 的摘要相同，决策就相同
        self.schedule_digest = hashlib.sha256()
        self.recent_steps: deque[tuple[str, tuple[int, ...], tuple[int, ...]]] = deque(maxlen=64)
        # << ch14
        self.eos_token_ids = set(config.eos_token_ids or read_eos_token_ids(str(config.model_path)))
        self.max_seq_len = self.engine.max_seq_len
        self.table = ReqTable(config.max_running_reqs)
        self.cache = CacheManager(
            self.engine.num_pages,
            self.engine.page_size,
            self.engine.page_table,
            create_prefix_cache(config.cache_type, self.engine.page_size),
        )
        self.prefill_manager = PrefillManager(
            self.cache,
            self.table,
            config.max_extend_tokens,
            # >> ch17
            config.kv_headroom,
            # << ch17
        )
        self.decode_manager = DecodeManager()
        self.stats = {"prefill_steps": 0, "decode_steps": 0, "prefill_tokens": 0}
        # >> ch17
        self.stats["retracted"] = 0  # decode 缺页时退回等待队列的次数
        # << ch17
        # >> ch19
        self.stats["sampled"] = 0  # 采样出的 token 数（分块中的请求那一行不算）
        # 重叠调度时主机等 GPU 算完上一步的时间（微秒）：每步都等得不少，说明 GPU 是瓶颈、主机有
        # 余裕；几乎不等，说明 GPU 算完了在等主机发下一步
        self.stats["gpu_wait_us"] = 0
        from minisgl.kernel.compiles import watch_triton_compiles

        # 服务中途 Triton 现编译一个 kernel，那一步就慢几百毫秒：数出来报进 /metrics，日志写明是
        # 哪个。观察者只拿着账本、不拿着调度器：没有 shutdown 的调度器照样能被回收（连同显存）
        self.stats["triton_compiles"] = 0
        self._stop_watching = watch_triton_compiles(
            lambda kernel, stats=self.stats: _count_compile(stats, kernel)
        )
        # << ch19
        # >> ch11
        # 重叠调度：前向放在自己的流上，处理结果晚一步。上一步发出去、还没处理的前向在 in_flight
        self.overlap = not ENV.DISABLE_OVERLAP_SCHEDULING
        self.device = self.engine.device
        self.stream = new_stream(self.device)
        self.in_flight: ForwardOutput | None = None
        # 每一行最近采样出的 token，留在设备上：下一步 decode 的输入直接从这里取，不必等它拷回主机
        self.last_token = torch.zeros(
            config.max_running_reqs, dtype=torch.int32, device=self.device
        )
        # << ch11

    # ------------------------------------------------------------ 接收请求

    def add_request(self, req: PendingReq) -> TokenOutput | None:
        """校验后放进等待队列。不合法的请求不进队列，立刻得到一个带错误说明的结束输出——
        绝不悄悄丢掉（官方实现对过长的输入只打一行日志，客户端会一直等下去）。"""
        error = self._validate(req)
        if error is not None:
            logger.warning(f"rejecting request {req.uid}: {error}")
            return TokenOutput(
                req.uid,
                None,
                finished=True,
                finish_reason="error",
                error=error,
                # >> ch16
                prompt_tokens=len(req.input_ids),
                # << ch16
            )
        self.prefill_manager.add(req)
        return None

    def _validate(self, req: PendingReq) -> str | None:
        ids, params = req.input_ids, req.sampling_params
        if ids.dim() != 1 or ids.dtype.is_floating_point:
            return f"input_ids must be a 1-D integer tensor, got {ids.dtype} {tuple(ids.shape)}"
        prompt_len = len(ids)
        if prompt_len == 0:
            return "the prompt is empty"
        vocab = self.engine.vocab_size
        if int(ids.min()) < 0 or int(ids.max()) >= vocab:  # 否则 embedding 越界，整个进程崩掉
            return f"token ids must be in [0, {vocab}), got {int(ids.min())}..{int(ids.max())}"
        # >> ch17
        bad = _bad_sampling_type(params)
        if bad is not None:
            return bad
        # << ch17
        if params.max_tokens < 1:
            return f"max_tokens must be >= 1, got {params.max_tokens}"
        if not 0.0 < params.top_p <= 1.0:
            return f"top_p must be in (0, 1], got {params.top_p}"
        if prompt_len >= self.max_seq_len:
            return (
                f"the prompt has {prompt_len} tokens, but the maximum context length is "
                f"{self.max_seq_len} tokens (prompt + at least 1 generated token)"
            )
        # 能生成多少：max_tokens、上下文长度、整个 KV 池的容量，三者取最小
        capacity = self.cache.num_pages * self.cache.page_size
        limit = min(self.max_seq_len, capacity)
        req.output_len = min(params.max_tokens, limit - prompt_len)
        if req.output_len < 1:
            return f"the prompt has {prompt_len} tokens, the whole KV cache holds {capacity}"
        return None

    # ------------------------------------------------------------ 一步

    @property
    def has_work(self) -> bool:
        # >> ch11
        if self.in_flight is not None:  # 上一步发出的前向，结果还没处理
            return True
        # << ch11
        return len(self.prefill_manager) > 0 or len(self.decode_manager) > 0

    def live_reqs(self) -> list[SchedReq]:
        """占着页表行和 KV 页的请求。"""
        live = self.decode_manager.running
        # >> ch09
        if self.prefill_manager.chunked is not None:  # 分块中的请求：出了等待队列，还没进 decode
            live.append(self.prefill_manager.chunked)
        # << ch09
        # >> ch11
        if self.in_flight is not None:  # 最后一个 token 已经发出去、结果还没处理：页还没还
            seen = {id(r) for r in live}
            live += [r for r in self.in_flight.batch.reqs if id(r) not in seen]  # type: ignore[misc]
            live = [r for r in live if not r.released]
        # << ch11
        return live

    def schedule_next_batch(self) -> Batch | None:
        """prefill 优先：能接纳新请求就做 prefill，否则 decode 全部运行中的请求。"""
        reqs: list[SchedReq] = []
        if len(self.prefill_manager):  # 有请求在等才接纳：算预留要把运行中的请求走一遍
            reserved = self.decode_manager.reserved_pages(
                self.cache, self.prefill_manager.reserve_until
            )
            # >> ch19
            self.cache.defer_writes()  # 接纳的这一批请求的页表写入攒起来，整批一次拷到设备
            # << ch19
            reqs = self.prefill_manager.schedule(reserved)
            # >> ch19
            self.cache.flush_writes()
            # << ch19
        if reqs:
            return Batch(reqs, "prefill")  # type: ignore[arg-type]
        running = self.decode_manager.running
        if not running:
            return None
        # >> ch17
        running = self._make_room_for_decode(running)
        # << ch17
        # ~~ ch08 < ch19
        # ~ for req in running:  # decode 这一步要写第 device_len 个 token 的 KV：跨页时补一页
        # ~     self.cache.ensure_pages(req, req.device_len)
        # ~~
        # >> ch19
        # decode 这一步要写第 device_len 个 token 的 KV：跨页时补一页，整批一次写进页表
        self.cache.ensure_decode_pages(running)
        # << ch19
        return Batch(running, "decode")  # type: ignore[arg-type]

    # >> ch17
    def _make_room_for_decode(self, running: list[SchedReq]) -> list[SchedReq]:
        """decode 这一步每个请求写一个 token，跨页的要补一页。能拿到的页不够时，按
        ``retract_order`` 把请求退回等待队列，直到够为止；返回留下的请求（原来的顺序）。

        只剩一个请求还不够，就连正在分块的那个也退回——只剩一个请求时一定够：``_validate``
        保证了每个请求单独放得下整个池子，别人的页都已经还回来或者可以淘汰。
        """

        # 每个请求这一步只写一个 token，最多差一页：能拿到的页不少于请求数时一定够，不必逐个去数
        # （batch 256 时逐个数一遍是每一步几百次函数调用）
        if len(running) <= self.cache.available_pages:
            return running

        def missing(req: SchedReq) -> int:
            return self.cache.pages_missing(req, req.device_len)

        keep = list(running)
        short = sum(map(missing, keep))  # 这一步一共还差几页；每退回一个，少它那一份
        for victim in self.decode_manager.retract_order():
            if short <= self.cache.available_pages or len(keep) == 1:
                break
            short -= missing(victim)
            self._retract(victim)
            keep.remove(victim)
        chunked = self.prefill_manager.chunked
        if short > self.cache.available_pages and chunked is not None:
            self._retract(chunked)
        return keep

    def _retract(self, req: SchedReq) -> None:
        """把占着行和页的请求退回等待队列的最前面，以后重算（recompute）。

        已经生成的 token 并进它的提示：重新接纳时从"提示 + 已生成"接着算，客户端只看到流停顿了
        一会儿。它算过的 KV 先交给前缀缓存（``_free_req`` 里的 ``cache_req``），重新接纳前没被
        淘汰的话，重算只是一次前缀命中。
        """
        if req is self.prefill_manager.chunked:
            self.prefill_manager.chunked = None
        req.retracted = True  # 重叠调度时，正在前向的那一步里它的结果到达时跳过
        self._free_req(req)
        generated = req.host_len - req.prompt_len
        self.prefill_manager.requeue(
            PendingReq(
                req.uid,
                req.input_ids,
                req.sampling_params,
                output_len=req.output_len - generated,
                generated=generated,
            )
        )
        self.stats["retracted"] += 1
        logger.info(f"retracted request {req.uid} after {generated} tokens: out of KV pages")

    # << ch17
    # >> ch14
    def _record_step(self, batch: Batch) -> None:
        step = (
            batch.phase,
            tuple(r.uid for r in batch.reqs),
            tuple(r.extend_len for r in batch.reqs),
        )
        self.recent_steps.append(step)
        self.schedule_digest.update(repr(step).encode())

    def sync_all_ranks(self) -> None:
        """所有 rank 都建好了（包括广播的订阅已经生效）才开始收请求。"""
        if isinstance(self.io, ZmqIO):
            self.io.sync()
        elif self.config.tp_info.size > 1:
            dist.barrier(group=cpu_group())

    # << ch14
    def forward(self, batch: Batch) -> ForwardOutput:
        """前向、采样，把采样出的 token 拷回主机。
        主机上的长度记账（``complete_one``）不需要 token 的值，现在就做。"""
        num_tokens = batch.num_tokens
        # >> ch14
        self._record_step(batch)
        # << ch14
        # ~~ ch08 < ch11
        # ~ prepare_batch(batch, self.engine.page_table)
        # ~~
        # >> ch11
        # rows：每个请求在页表里的行（在设备上）。采样出的 token 写回 last_token 的这几行
        if batch.is_decode:  # 上一步采样的 token 也许还没拷回主机：输入从设备上的 last_token 取
            rows = self._prepare_decode(batch)
        else:  # prefill 的输入是提示，主机上早就有
            rows = torch.tensor([r.table_idx for r in batch.reqs], dtype=torch.int32)
            rows = to_device(rows, self.device)
            prepare_batch(batch, self.engine.page_table)
        # << ch11
        next_tokens = self.engine.forward_batch(batch)
        # >> ch11
        self.last_token[rows] = next_tokens.to(torch.int32)
        # << ch11
        # >> ch09
        # 提示还没算完的请求（分块）：不采样、不 decode；记下来交给 process，它们的 token 丢掉。
        # 只有 prefill 批次里才有（decode 批次不用逐个去问，每一步能省下几百次）
        chunked: frozenset[int] = frozenset()
        if batch.is_prefill:
            chunked = frozenset(r.uid for r in batch.reqs if r.is_chunked)  # type: ignore[attr-defined]
        # << ch09
        for req in batch.reqs:
            # >> ch09
            if req.uid in chunked:  # 这一块的 KV 已经写进去了，下一块从这里接着算
                req.cached_len = req.device_len
                continue
            # << ch09
            req.complete_one()
        # >> ch10
        if batch.is_prefill:  # 提示的 KV 一算完就进缓存：同时到达的相同前缀马上就能复用
            for req in batch.reqs:
                self.cache.cache_req(req)  # type: ignore[arg-type]
        # << ch10
        self.decode_manager.update(batch.reqs)  # type: ignore[arg-type]
        key = "prefill" if batch.is_prefill else "decode"
        self.stats[f"{key}_steps"] += 1
        if batch.is_prefill:
            self.stats["prefill_tokens"] += num_tokens
        # >> ch19
        self.stats["sampled"] += len(batch.reqs) - len(chunked)
        # << ch19
        # >> ch11
        if self.overlap:  # 结果下一步才处理：拷到锁页内存里，拷贝才真的是异步的
            host = pin_memory(torch.empty(next_tokens.shape, dtype=next_tokens.dtype), self.device)
            host.copy_(next_tokens, non_blocking=True)
            copy_done = new_event(self.device)  # 处理结果时只等这一次拷贝，不等整个设备
            copy_done.record()
            return ForwardOutput(batch, host, chunked, copy_done)
        # << ch11
        return ForwardOutput(
            batch,
            next_tokens.cpu(),  # 等拷贝完成：处理结果马上要读
            # >> ch09
            chunked,
            # << ch09
        )

    # >> ch11
    def _prepare_decode(self, batch: Batch) -> torch.Tensor:
        """decode 批次的三个输入张量，全在设备上得到：每个请求 1 个 token，位置 device_len - 1。
        返回这些请求在页表里的行（在设备上）。"""
        reqs = batch.reqs
        # 行号和位置一次拷到设备。锁页 + 异步拷贝：普通的 .to(device) 要等流上排着的前向
        # 都算完，重叠就白做了
        rows, pos = ints_to_device(
            ([r.table_idx for r in reqs], [r.device_len - 1 for r in reqs]), self.device
        )
        batch.input_ids = self.last_token[rows]
        batch.positions = pos
        batch.out_loc = self.engine.page_table[rows, pos]
        return rows

    # << ch11
    def process(self, output: ForwardOutput) -> list[TokenOutput]:
        """读回 token，判断谁结束了；结束的请求归还页表行和 KV 页（恰好一次）。"""
        outputs: list[TokenOutput] = []
        # >> ch11
        if output.copy_done is not None:
            # >> ch19
            start = time.perf_counter()
            # << ch19
            output.copy_done.synchronize()
            # >> ch19
            self.stats["gpu_wait_us"] += round((time.perf_counter() - start) * 1e6)
            # << ch19
        # << ch11
        tokens = output.next_tokens.tolist()
        for req, token in zip(output.batch.reqs, tokens):
            # >> ch09
            if req.uid in output.chunked:  # 提示还没算完：这一行采样出的 token 没有意义
                continue
            # << ch09
            assert isinstance(req, SchedReq)
            # >> ch11
            # 重叠调度下，一个请求在第 N 步结束（或被中止）之前，第 N+1 步已经把它算了进去：
            # 那一步的 token 丢掉。它在结束时已经释放过了，这里绝不能再释放一次（PR #111）
            if req.released:
                continue
            # << ch11
            req.append_host(token)
            generated = req.host_len - req.prompt_len  # 数主机上收到的 token
            if token in self.eos_token_ids and not req.sampling_params.ignore_eos:
                req.finish_reason = "stop"
            elif generated >= req.output_len:
                req.finish_reason = "length"
            if req.finished:
                self._free_req(req)
            outputs.append(
                TokenOutput(
                    req.uid,
                    token,
                    req.finished,
                    req.finish_reason,
                    # >> ch16
                    prompt_tokens=req.prompt_len,
                    completion_tokens=generated,
                    # << ch16
                )
            )
        return outputs

    def _free_req(self, req: SchedReq) -> None:
        self.decode_manager.remove(req)
        # >> ch10
        self.cache.cache_req(req)  # 生成的内容也缓存起来：多轮对话的下一轮从这里接着算
        # << ch10
        self.cache.release_req(req)
        self.table.free(req.table_idx)

    def step(self) -> list[TokenOutput]:
        """一步：组批、前向、处理结果。没有可做的事时返回空列表。"""
        # >> ch11
        if self.overlap:
            return self._overlap_step()
        # << ch11
        batch = self.schedule_next_batch()
        if batch is None:
            return []
        return self.process(self.forward(batch))

    # >> ch11
    def _overlap_step(self) -> list[TokenOutput]:
        """重叠调度的一步：先发出第 N+1 步，再处理第 N 步的结果。

        发出前向只是把 kernel 排进流里，立刻返回；设备在算第 N+1 步的同时，主机在处理第 N 步的
        结果、接收新请求、准备第 N+2 步。所有设备上的操作（页表、last_token 的写入）都在同一个流
        上排队，先后顺序由流保证。CPU 上流和事件是空壳，结构完全相同，只是没有真的并行。
        """
        with stream_context(self.stream):
            batch = self.schedule_next_batch()
            ongoing = self.forward(batch) if batch is not None else None
            last, self.in_flight = self.in_flight, ongoing
            return self.process(last) if last is not None else []

    def abort_request(self, uid: int) -> list[TokenOutput]:
        """中止 ``uid``：排队的直接拿掉；分块中、运行中的释放行和页。正在前向的那一步的结果
        到达时，请求已经是结束状态，会被跳过。已经结束或者不存在的 uid 什么也不做。"""
        found = self.prefill_manager.abort(uid)
        if found is None:
            found = self.decode_manager.get(uid)
        if found is None:
            return []
        if isinstance(found, SchedReq):
            found.finish_reason = "abort"
            with stream_context(self.stream):  # 释放时可能改页表：和前向排在同一个流上
                self._free_req(found)
        logger.info(f"aborted request {uid}")
        return [TokenOutput(uid, None, finished=True, finish_reason="abort")]

    # << ch11
    # ------------------------------------------------------------ 主循环

    def handle(self, command: SchedulerCommand) -> list[TokenOutput]:
        if isinstance(command, PendingReq):
            error = self.add_request(command)
            return [error] if error is not None else []
        # >> ch11
        if isinstance(command, AbortReq):
            return self.abort_request(command.uid)
        # << ch11
        raise TypeError(f"unknown command {command!r}")

    def run_forever(self) -> None:
        """收命令、走一步、发输出，直到收到 ``ExitReq``。手上没活时阻塞地等命令，不空转。"""
        while True:
            outputs: list[TokenOutput] = []
            for command in self.io.receive(blocking=not self.has_work):
                if isinstance(command, ExitReq):
                    return
                outputs += self.handle(command)
            outputs += self.step()
            if outputs:
                self.io.send(outputs)

    def check_integrity(self) -> None:
        """KV 页和请求表的账目都对得上（测试在每一步之后调用）。"""
        live = self.live_reqs()
        self.cache.check_integrity(live)
        rows = [r.table_idx for r in live]
        if len(set(rows)) != len(rows) or set(rows) != self.table.used_rows():
            used = sorted(self.table.used_rows())
            raise RuntimeError(f"rows held by live requests {sorted(rows)} != used rows {used}")

    def shutdown(self) -> None:
        # >> ch19
        if self._stop_watching is not None:
            self._stop_watching()
        # << ch19
        self.io.close()
        self.engine.shutdown()


# >> ch19
def _count_compile(stats: dict[str, int], kernel: str) -> None:
    from minisgl.kernel.compiles import COMPILE_WARNING

    stats["triton_compiles"] += 1
    # 引擎建好以后才开始数：数到的都是服务中途的，每一个都让那一步停顿，所以是警告
    logger.warning(COMPILE_WARNING + "%s", kernel)


# << ch19
# >> ch14
def run_scheduler(config: SchedulerConfig) -> tuple[str, list[tuple]]:
    """一个 rank 的调度进程（给 ``spawn_ranks`` 用）：建调度器、等所有 rank 就绪、一直服务到收到
    ``ExitMsg``。返回调度摘要和最近几步的调度，用来比较各 rank 是否一致。"""
    scheduler = Scheduler(replace(config, tp_info=get_tp_info()))
    try:
        scheduler.sync_all_ranks()
        scheduler.run_forever()
        return scheduler.schedule_digest.hexdigest(), list(scheduler.recent_steps)
    finally:
        scheduler.shutdown()


__all__ += ["run_scheduler"]
# << ch14
