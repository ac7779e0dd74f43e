"""调度器的输入输出：请求从哪里来，生成的 token 到哪里去。

``run_forever`` 只认识两个动作：``receive()`` 取回新到的命令，``send()`` 交出这一步的输出。
进程内的实现 ``LocalIO`` 是两个线程安全的队列，测试里用它从另一个线程喂请求（离线的 ``LLM``
更简单，直接调用 ``add_request`` 和 ``step``）。把调度器放进自己的进程，只要再写一个收发
进程间消息的实现，调度循环一行不改。
"""

from __future__ import annotations

import queue
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Union

from .utils import PendingReq, TokenOutput

__all__ = ["ExitReq", "LocalIO", "SchedulerCommand", "SchedulerIO"]


@dataclass(frozen=True)
class ExitReq:
    """让 ``run_forever`` 退出。"""


# >> ch11
from .utils import AbortReq

# << ch11
# 调度器收到的命令
SchedulerCommand = Union[
    PendingReq,
    # >> ch11
    AbortReq,
    # << ch11
    ExitReq,
]


class SchedulerIO(ABC):
    @abstractmethod
    def receive(self, blocking: bool) -> list[SchedulerCommand]:
        """取回所有已经到达的命令。``blocking``：调度器手上没活时，至少等到一条再返回，
        而不是空转占满一个 CPU 核。"""

    @abstractmethod
    def send(self, outputs: list[TokenOutput]) -> None: ...

    def close(self) -> None:  # noqa: B027 —— 大多数实现没有要关的东西
        """释放 socket 之类的资源。"""


class LocalIO(SchedulerIO):
    """同一个进程里的输入输出：客户端线程 ``submit()``、``get()``；调度线程 ``receive()``、
    ``send()``。"""

    def __init__(self) -> None:
        self.inbox: queue.Queue[SchedulerCommand] = queue.Queue()
        self.outbox: queue.Queue[TokenOutput] = queue.Queue()

    # 客户端这一侧
    def submit(self, command: SchedulerCommand) -> None:
        self.inbox.put(command)

    def get(self, timeout: float | None = None) -> TokenOutput:
        return self.outbox.get(timeout=timeout)

    # 调度器这一侧
    def receive(self, blocking: bool) -> list[SchedulerCommand]:
        commands: list[SchedulerCommand] = []
        if blocking:
            commands.append(self.inbox.get())
        while True:
            try:
                commands.append(self.inbox.get_nowait())
            except queue.Empty:
                return commands

    def send(self, outputs: list[TokenOutput]) -> None:
        for out in outputs:
            self.outbox.put(out)


# >> ch14
# ---------------------------------------------------------------- 多进程：ZMQ（第 14 章）

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from minisgl.distributed import cpu_group
from minisgl.message import (
    AbortBackendMsg,
    BaseBackendMsg,
    BaseTokenizerMsg,
    BatchBackendMsg,
    BatchTokenizerMsg,
    DetokenizeMsg,
    ExitMsg,
    # >> ch16
    ReplyStatus,
    # << ch16
    UserMsg,
)
from minisgl.utils import ZmqPubQueue, ZmqPullQueue, ZmqPushQueue, ZmqSubQueue, init_logger

if TYPE_CHECKING:
    from .config import SchedulerConfig

logger = init_logger(__name__)

__all__ += ["ZmqIO", "to_commands"]


def to_commands(msg: BaseBackendMsg) -> list[SchedulerCommand]:
    """把发给调度器的消息翻译成调度循环认识的命令（批量消息拆开）。"""
    if isinstance(msg, BatchBackendMsg):
        return [cmd for m in msg.data for cmd in to_commands(m)]
    if isinstance(msg, UserMsg):
        return [PendingReq(msg.uid, msg.input_ids, msg.sampling_params)]
    if isinstance(msg, AbortBackendMsg):
        return [AbortReq(msg.uid)]
    if isinstance(msg, ExitMsg):
        return [ExitReq()]
    raise TypeError(f"unexpected message for the scheduler: {type(msg).__name__}")


class ZmqIO(SchedulerIO):
    """多进程时调度器的输入输出。

    - rank 0：从 tokenizer 收（PULL），往 detokenizer 发（PUSH）；tp > 1 时把收到的**原始字节**
      原样转发给其他 rank（XPUB），不解码再编码，保证每个 rank 拿到逐字节相同的消息；
    - 其他 rank：只从 rank 0 的广播收（SUB），不往外发——每个 rank 生成的 token 都一样，
      rank 0 发一份就够。

    每一步先用 gloo 广播"这一步有几条消息"，各 rank 再各取这么多条：所有 rank 看到同一串命令，
    做出同一个调度决策，否则张量并行的集合通信会对不上、卡死。
    """

    POLL_MS = 100  # tp > 1 时空闲也每 0.1 秒对齐一次：集合通信不会因为长时间空闲而超时

    def __init__(self, config: SchedulerConfig) -> None:
        self.rank, self.size = config.tp_info.rank, config.tp_info.size
        if config.zmq_backend_addr is None or config.zmq_detokenizer_addr is None:
            raise ValueError("ZmqIO needs zmq_backend_addr and zmq_detokenizer_addr")
        if self.size > 1 and config.zmq_broadcast_addr is None:
            raise ValueError("tp > 1 needs zmq_broadcast_addr")
        self.recv: ZmqPullQueue | None = None
        self.out: ZmqPushQueue | None = None
        self.pub: ZmqPubQueue | None = None
        self.sub: ZmqSubQueue | None = None
        if self.rank == 0:
            self.recv = ZmqPullQueue(config.zmq_backend_addr, True, BaseBackendMsg.decoder)
            self.out = ZmqPushQueue(config.zmq_detokenizer_addr, False, BaseTokenizerMsg.encoder)
            if self.size > 1:
                assert config.zmq_broadcast_addr is not None
                self.pub = ZmqPubQueue(config.zmq_broadcast_addr, True, BaseBackendMsg.encoder)
        else:
            assert config.zmq_broadcast_addr is not None
            self.sub = ZmqSubQueue(config.zmq_broadcast_addr, False, BaseBackendMsg.decoder)

    def sync(self, timeout_s: float = 60.0) -> None:
        """所有 rank 都就绪（包括订阅生效）再开始：rank 0 等齐 size - 1 个订阅者，再一起过栅栏。"""
        if self.size == 1:
            return
        if self.pub is not None:
            self.pub.wait_for_subscribers(self.size - 1, timeout=timeout_s)
        dist.barrier(group=cpu_group())

    def _take_raw(self, blocking: bool) -> list[bytes]:
        """rank 0：取回已经到达的原始帧。blocking 时先等到第一条（tp > 1 时最多等 POLL_MS）。"""
        assert self.recv is not None
        raws: list[bytes] = []
        if blocking:
            timeout = self.POLL_MS if self.size > 1 else None
            if self.recv.socket.poll(timeout):
                raws.append(self.recv.get_raw())
        while not self.recv.empty():
            raws.append(self.recv.get_raw())
        return raws

    def receive(self, blocking: bool) -> list[SchedulerCommand]:
        raws = self._take_raw(blocking) if self.rank == 0 else []
        count = len(raws)
        if self.size > 1:
            n = torch.tensor([count], dtype=torch.int64)
            dist.broadcast(n, src=0, group=cpu_group())
            count = int(n.item())
            if self.pub is not None:
                for raw in raws:
                    self.pub.put_raw(raw)
        commands: list[SchedulerCommand] = []
        for i in range(count):
            # 坏消息：每个 rank 拿到的是同样的字节，都会在同一条上失败、跳过它，决策依然一致；
            # 调度循环不会因为一条坏消息退出
            try:
                if self.recv is not None:
                    msg = self.recv.decode(raws[i])
                else:
                    assert self.sub is not None
                    msg = self.sub.get()
                commands += to_commands(msg)
            except Exception as e:
                logger.error(f"dropping a malformed message for the scheduler: {e!r}")
        return commands

    def send(self, outputs: list[TokenOutput]) -> None:
        if self.out is None:
            return
        # token 为 None（请求出错或被中止）时发 -1：detokenizer 据此只回一个空的结束回复
        msgs = [
            DetokenizeMsg(
                o.uid,
                o.token if o.token is not None else -1,
                o.finished,
                # >> ch16
                # 结束原因和用量打包成一个 ReplyStatus，detokenizer 原样转给 API Server
                ReplyStatus(o.finish_reason, o.error, o.prompt_tokens, o.completion_tokens),
                # << ch16
            )
            for o in outputs
        ]
        self.out.put(BatchTokenizerMsg(msgs))  # type: ignore[arg-type]

    def close(self) -> None:
        for q in (self.recv, self.out, self.pub, self.sub):
            if q is not None:
                q.stop()


# << ch14
