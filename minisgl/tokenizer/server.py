"""tokenizer 进程：在 API Server 和调度器之间，一头分词、一头反分词。

消息的流向（第 12 章的三组消息）::

    API Server ──TokenizeMsg / AbortMsg──▶ ┌───────────┐ ──UserMsg / AbortBackendMsg──▶ 调度器
                                            │ tokenizer │
    API Server ◀────────UserReply────────── └───────────┘ ◀────────DetokenizeMsg──────── 调度器

一个进程只有一个接收地址（PULL）：API Server 和调度器都往这里推消息，进程按类型分拣。

- ``TokenizeMsg`` → 分词 → ``UserMsg`` 发给调度器；
- ``DetokenizeMsg`` → 增量反分词 → ``UserReply`` 发给 API Server，一条对一条（文本可以是空串）；
- ``AbortMsg`` → ``AbortBackendMsg`` 发给调度器，同时丢掉这个请求的反分词状态；
- ``BatchTokenizerMsg`` → 拆开，逐条按上面处理。

发出去的也打包：一轮里给同一个接收方的多条消息合成一条 ``Batch...Msg``，只有一条时直接发它。

进程数：默认（``--num-tokenizer 0``）只起**一个**进程，分词和反分词都归它，它 ``bind`` 接收地址，
API Server 和调度器 ``connect`` 过来。请求多、分词成了瓶颈时，可以另起 N 个只做分词的进程：
它们共用一个分词地址，这时由 API Server 那一头 ``bind``（一个 PUSH 面对 N 个 PULL，ZMQ 轮流
把消息分给它们），N 个进程都 ``connect``；反分词仍然只有一个进程，因为每个请求的反分词状态
必须在同一个地方。谁 bind 由参数 ``create`` 决定，见第 15 章的启动器。
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

from minisgl.message import (
    AbortBackendMsg,
    AbortMsg,
    BaseBackendMsg,
    BaseFrontendMsg,
    BaseTokenizerMsg,
    BatchBackendMsg,
    BatchFrontendMsg,
    BatchTokenizerMsg,
    DetokenizeMsg,
    MessageDecodeError,
    TokenizeMsg,
    UserMsg,
    UserReply,
)
from minisgl.utils import (
    ZmqPullQueue,
    ZmqPushQueue,
    init_logger,
    load_tokenizer,
    read_eos_token_ids,
)

from .detokenize import DetokenizeManager
from .tokenize import TokenizeManager

if TYPE_CHECKING:
    import multiprocessing as mp
    from collections.abc import Iterable

    from transformers import PreTrainedTokenizerBase

__all__ = ["TokenizerWorker", "tokenize_worker", "unwrap"]

# >> ch17
from minisgl.message import ReplyStatus
from minisgl.models.config import ModelConfig

# << ch17
logger = init_logger(__name__)


def unwrap(msg: BaseTokenizerMsg) -> list[BaseTokenizerMsg]:
    """``BatchTokenizerMsg`` 拆成一条条消息（也能拆嵌套的）；别的消息原样放进列表。"""
    if isinstance(msg, BatchTokenizerMsg):
        return [m for inner in msg.data for m in unwrap(inner)]
    return [msg]


def _pack(msgs: list[Any], batch_cls: type) -> Any:
    """一条就发它自己，多条打包成一条 ``Batch...Msg``。"""
    return msgs[0] if len(msgs) == 1 else batch_cls(data=msgs)


class TokenizerWorker:
    """一轮消息进来，两组消息出去：不碰 socket，测试可以直接调用。"""

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, eos_token_ids: Iterable[int] | None = None
    ) -> None:
        self.tokenize_manager = TokenizeManager(tokenizer)
        self.detokenize_manager = DetokenizeManager(tokenizer, eos_token_ids)
        # >> ch17
        self.context_length: int | None = None  # 提示 + 输出最多多少个 token；None：不预先检查
        # << ch17

    # >> ch17
    def obviously_too_long(self, text: str | list[dict[str, str]]) -> str | None:
        """一段提示显然比上下文长时，不把它整个编码，返回拒绝的理由；否则 None。

        编码几 MB 的文本要好几秒，这段时间这个进程谁的请求也处理不了（别的客户端跟着等）。常见
        分词器里一个 token 平均不到 ``_CHARS_PER_TOKEN`` 个字符，所以只看比上下文的这么多倍还长的
        字符串：只编码开头那么长的一段，数出的 token（减去截断处那个词可能多切出的几个）已经不少于
        上下文，整段只会更多，直接拒绝。没到的（字符特别长的 token 组成的文本），照常整段编码，
        由调度器按准确的长度检查。对话在渲染模板之后才有字符串，这里不管。"""
        if self.context_length is None or not isinstance(text, str):
            return None
        head = _CHARS_PER_TOKEN * self.context_length
        if len(text) <= head:
            return None
        tokenizer = self.tokenize_manager.tokenizer
        counted = len(tokenizer(text[:head], add_special_tokens=True, verbose=False)["input_ids"])
        at_least = counted - _CUT_SLACK
        if at_least < self.context_length:
            return None
        return (
            f"the prompt has at least {at_least} tokens (counted in its first {head} characters), "
            f"but the maximum context length is {self.context_length} tokens"
        )

    # << ch17
    def handle(
        self, msgs: list[BaseTokenizerMsg]
    ) -> tuple[list[BaseBackendMsg], list[BaseFrontendMsg]]:
        """返回 (发给调度器的, 发给 API Server 的)，各自保持到达的先后顺序。"""
        detok = [m for m in msgs if isinstance(m, DetokenizeMsg)]
        texts = self.detokenize_manager.detokenize(detok)
        frontend: list[BaseFrontendMsg] = [
            UserReply(
                uid=m.uid,
                incremental_output=t,
                finished=m.finished,
                # >> ch16
                status=m.status,  # 调度器算出的结束原因和用量，原样转给 API Server
                # << ch16
            )
            for m, t in zip(detok, texts, strict=True)
        ]
        tok = [m for m in msgs if isinstance(m, TokenizeMsg)]
        # >> ch17
        rejected = {m.uid: why for m in tok if (why := self.obviously_too_long(m.text)) is not None}
        for uid, why in rejected.items():  # 不经过调度器：API Server 照样回 400
            logger.warning(f"rejecting request {uid}: {why}")
            frontend.append(UserReply(uid, "", True, ReplyStatus("error", why)))
        tok = [m for m in tok if m.uid not in rejected]
        # << ch17
        tensors = iter(self.tokenize_manager.tokenize(tok))
        backend: list[BaseBackendMsg] = []
        # 发给调度器的按到达的顺序排：同一个 uid 的 TokenizeMsg 和 AbortMsg 先后不能颠倒，
        # 否则调度器先收到中止（找不到这个请求，什么也不做），再收到请求，它就一直跑到结束
        for m in msgs:
            # >> ch17
            if isinstance(m, TokenizeMsg) and m.uid in rejected:
                continue
            # << ch17
            if isinstance(m, TokenizeMsg):
                backend.append(
                    UserMsg(uid=m.uid, input_ids=next(tensors), sampling_params=m.sampling_params)
                )
            elif isinstance(m, AbortMsg):
                backend.append(AbortBackendMsg(uid=m.uid))
                self.detokenize_manager.abort(m.uid)
            elif not isinstance(m, DetokenizeMsg):
                logger.warning(f"ignoring unexpected message {type(m).__name__}")
        return backend, frontend


# >> ch17
_CHARS_PER_TOKEN = 8
_CUT_SLACK = 64  # 截断处的半个词单独编码时，最多比它在整段里多出这么多个 token（留得很宽）


# << ch17
class _StopOnSignal:
    """SIGTERM 的处理函数：抛出 ``KeyboardInterrupt``，和 Ctrl-C 走同一条退出路径，同时记下收到过。

    只抛异常不够：信号处理函数在哪一行字节码之间运行是不定的，异常要是落在 ``__del__`` 或者
    别的回调里（加载分词器时，正好有对象被回收），Python 只打印一句 "Exception ignored" 就把它
    吞掉，进程照常往下跑（或者接着堵在 ``recv`` 里），启动器等满 5 秒只好 SIGKILL。所以就绪
    之前、每一轮取消息之前、空闲时每隔一会儿，再 ``check()`` 一次。"""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: object) -> None:
        self.received = True
        raise KeyboardInterrupt(f"signal {signum}")

    def check(self) -> None:
        if self.received:
            raise KeyboardInterrupt("a signal arrived earlier")


IDLE_CHECK_MS = 500  # 没有消息时，隔多久看一次是不是收到过停止的信号


def _receive(
    recv: ZmqPullQueue[BaseTokenizerMsg], local_bs: int, stop: _StopOnSignal
) -> list[BaseTokenizerMsg]:
    """阻塞到至少有一条消息，再把已经到了的取走，凑够 ``local_bs`` 条（拆包之后数）就停。

    空着的时候不一直堵在 ``recv`` 里，每 ``IDLE_CHECK_MS`` 毫秒醒来 ``stop.check()`` 一次：停止
    信号的异常要是被某个 ``__del__`` 吞掉了（见 ``_StopOnSignal``），这里也能发现。
    解不开的帧（别的版本的进程、截断的数据）记一条错误就扔掉：一个坏消息不该让整个服务停下。
    """
    msgs: list[BaseTokenizerMsg] = []
    while not msgs or (len(msgs) < local_bs and not recv.empty()):
        while not msgs and recv.socket.poll(timeout=IDLE_CHECK_MS) == 0:
            stop.check()
        raw = recv.get_raw()
        try:
            msgs.extend(unwrap(recv.decode(raw)))
        except MessageDecodeError as e:
            logger.error(f"dropping a malformed message: {e}")
    return msgs


def tokenize_worker(
    *,
    tokenizer_path: str,
    addr: str,
    create: bool,
    backend_addr: str,
    frontend_addr: str,
    local_bs: int = 1,
    ack_queue: mp.Queue[str] | None = None,
    tokenizer_id: int = 0,
    # >> ch17
    max_seq_len: int | None = None,
    # << ch17
) -> None:
    """tokenizer 进程的主函数，一直运行到收到 SIGTERM 或 SIGINT（Ctrl-C）。

    - ``addr``：本进程接收消息的地址；``create=True`` 时本进程 ``bind`` 它，否则 ``connect``；
    - ``backend_addr``、``frontend_addr``：调度器、API Server 各自 ``bind`` 的地址，本进程 connect；
    - ``local_bs``：一轮最多取几条消息一起处理（分词、反分词都是整批调用分词器）；
    - ``ack_queue``：准备好（分词器加载完、socket 都建好）之后往里放一句话，启动器等齐所有进程
      的这句话再开始服务。

    退出时关掉全部 socket（linger=0，没送出去的消息直接丢掉，不会卡在退出的路上），
    bind 的 ipc socket 文件也随之删掉。
    """
    # SIGTERM（Process.terminate()、kill）和 Ctrl-C 走同一条退出路径。阻塞在 recv 里时，
    # pyzmq 被信号打断后会先运行 Python 的信号处理函数，所以等消息时也能及时退出
    stop = _StopOnSignal()
    signal.signal(signal.SIGTERM, stop)
    init_logger(__name__, f"tokenizer_{tokenizer_id}")  # 日志里标上是哪一个 tokenizer 进程
    queues: list[ZmqPullQueue | ZmqPushQueue] = []
    try:
        if local_bs < 1:
            raise ValueError(f"local_bs must be >= 1, got {local_bs}")
        tokenizer = load_tokenizer(tokenizer_path)
        # 和调度器用同一组停止符（第 8 章）
        eos = {*read_eos_token_ids(tokenizer_path), tokenizer.eos_token_id} - {None}
        worker = TokenizerWorker(tokenizer, eos)
        # >> ch17
        # 显然太长的提示不整个编码（``obviously_too_long``）：上下文长度和调度器的算法相同
        if max_seq_len is None:
            max_seq_len = ModelConfig.from_pretrained(tokenizer_path).rotary_config.max_position
        worker.context_length = max_seq_len
        # << ch17
        recv = ZmqPullQueue(addr, create=create, decoder=BaseTokenizerMsg.decoder)
        queues.append(recv)
        send_backend = ZmqPushQueue(backend_addr, create=False, encoder=BaseBackendMsg.encoder)
        queues.append(send_backend)
        send_frontend = ZmqPushQueue(frontend_addr, create=False, encoder=BaseFrontendMsg.encoder)
        queues.append(send_frontend)
        stop.check()
        if ack_queue is not None:
            ack_queue.put(f"tokenizer {tokenizer_id} is ready")
        while True:
            stop.check()
            msgs = _receive(recv, local_bs, stop)
            backend, frontend = worker.handle(msgs)
            logger.debug(f"{len(msgs)} messages in, {len(backend)} + {len(frontend)} out")
            if backend:
                send_backend.put(_pack(backend, BatchBackendMsg))
            if frontend:
                send_frontend.put(_pack(frontend, BatchFrontendMsg))
    except KeyboardInterrupt:
        logger.info(f"tokenizer {tokenizer_id} exiting")
    finally:
        # 收拾的时候再来一个信号不能把收拾打断
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for q in queues:
            q.stop()
