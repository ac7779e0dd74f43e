"""第 12 章：消息的序列化往返、msgpack 线格式、坏数据的报错，以及真实 ipc socket 上的几种队列。

所有收消息的地方都设了接收超时（``guard``），只为了让出错的测试失败而不是卡住；
测试本身不断言任何时间。
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import msgpack
import pytest
import torch
import zmq

import minisgl
from minisgl.core import SamplingParams
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
    ExitMsg,
    MessageDecodeError,
    TokenizeMsg,
    UserMsg,
    UserReply,
)
from minisgl.utils import (
    ZmqAsyncPullQueue,
    ZmqAsyncPushQueue,
    ZmqPubQueue,
    ZmqPullQueue,
    ZmqPushQueue,
    ZmqSubQueue,
    ipc_addr,
    ipc_path,
)

PACKAGE_PARENT = str(Path(minisgl.__file__).resolve().parent.parent)
HANG_GUARD_MS = 10_000  # 只防卡死：正常情况下消息在毫秒内到达


def guard(q: Any) -> Any:
    """收消息最多等 HANG_GUARD_MS，超时抛 zmq.Again，测试失败而不是卡住。"""
    q.socket.setsockopt(zmq.RCVTIMEO, HANG_GUARD_MS)
    return q


def same(a: Any, b: Any) -> bool:
    """逐字段比较，张量要 dtype 和数值都相同（dataclass 的 == 对多元素张量不适用）。"""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(
                a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)
            )  # 按位比较，NaN 也算
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if hasattr(a, "__dataclass_fields__"):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return a == b


def user_msg(uid: int, ids: list[int]) -> UserMsg:
    return UserMsg(
        uid=uid,
        input_ids=torch.tensor(ids, dtype=torch.int32),
        sampling_params=SamplingParams(temperature=0.7, top_k=20, top_p=0.9, max_tokens=16),
    )


BACKEND = [
    user_msg(1, [9707, 11, 1879]),
    AbortBackendMsg(uid=3),
    ExitMsg(),
    BatchBackendMsg(data=[user_msg(4, [1]), AbortBackendMsg(uid=4), ExitMsg()]),
    BatchBackendMsg(data=[BatchBackendMsg(data=[user_msg(5, [])]), BatchBackendMsg(data=[])]),
]
TOKENIZER = [
    TokenizeMsg(uid=1, text="你好，世界", sampling_params=SamplingParams()),
    TokenizeMsg(
        uid=2,
        text=[{"role": "system", "content": "简短地回答"}, {"role": "user", "content": "1+1=?"}],
        sampling_params=SamplingParams(ignore_eos=True, max_tokens=3),
    ),
    DetokenizeMsg(uid=1, next_token=151645, finished=True),
    AbortMsg(uid=2),
    BatchTokenizerMsg(data=[DetokenizeMsg(uid=1, next_token=0, finished=False), AbortMsg(uid=1)]),
]
FRONTEND = [
    UserReply(uid=1, incremental_output="你好", finished=False),
    UserReply(uid=1, incremental_output="", finished=True),
    BatchFrontendMsg(
        data=[UserReply(uid=i, incremental_output=f"#{i}", finished=i == 2) for i in range(3)]
    ),
]
CASES = (
    [(BaseBackendMsg, m) for m in BACKEND]
    + [(BaseTokenizerMsg, m) for m in TOKENIZER]
    + [(BaseFrontendMsg, m) for m in FRONTEND]
)


@pytest.mark.parametrize("base, msg", CASES, ids=lambda x: type(x).__name__)
def test_every_message_round_trips_through_msgpack(base: Any, msg: Any) -> None:
    raw = msgpack.packb(base.encoder(msg), use_bin_type=True)
    assert isinstance(raw, bytes)
    back = base.decoder(msgpack.unpackb(raw, raw=False))
    assert type(back) is type(msg)
    assert same(back, msg)
    # 实例上调用 encoder() 和 Base.encoder(msg) 是同一回事（队列拿到的是后者）
    assert msg.encoder() == base.encoder(msg)


def test_wire_format_is_plain_msgpack_with_type_tags() -> None:
    msg = BatchBackendMsg(data=[user_msg(7, [9707, 11, 1879])])
    d = msg.encoder()
    # 字段按声明的顺序，嵌套的对象和张量都带 __type__
    assert list(d) == ["__type__", "data"] and d["__type__"] == "BatchBackendMsg"
    inner = d["data"][0]
    assert list(inner) == ["__type__", "uid", "input_ids", "sampling_params"]
    assert inner["input_ids"] == {
        "__type__": "Tensor",
        "buffer": torch.tensor([9707, 11, 1879], dtype=torch.int32).numpy().tobytes(),
        "dtype": "torch.int32",
    }
    # 后面的章节只在末尾加字段（第 16 章的 seed），前面这几个的顺序不变
    assert list(inner["sampling_params"])[:6] == [
        "__type__", "temperature", "top_k", "top_p", "ignore_eos", "max_tokens",
    ]  # fmt: skip
    # 线上就是普通的 msgpack：任何语言的 msgpack 库都能解开，token 是 bin 类型的原始字节
    raw = msgpack.packb(d, use_bin_type=True)
    assert msgpack.unpackb(raw, raw=False) == d
    assert raw.count(inner["input_ids"]["buffer"]) == 1


@pytest.mark.parametrize(
    "dtype",
    [torch.int32, torch.int64, torch.int8, torch.uint8, torch.bool, torch.float32,
     torch.float16, torch.bfloat16, torch.float64],
)  # fmt: skip
def test_tensors_of_every_dtype_round_trip_bit_for_bit(dtype: torch.dtype) -> None:
    base = torch.tensor([0.0, 1.0, -2.5, 3.140625, 65504.0, -0.0])
    t = (base != 0) if dtype == torch.bool else base.to(dtype)
    if dtype.is_floating_point:
        t = torch.cat([t, torch.tensor([float("nan"), float("inf")], dtype=dtype)])
    for sample in (t, t[::2], t[:0]):  # 连续的、跨步的、空的
        d = UserMsg(uid=0, input_ids=sample, sampling_params=SamplingParams()).encoder()
        assert d["input_ids"]["dtype"] == str(dtype)
        assert len(d["input_ids"]["buffer"]) == sample.numel() * sample.element_size()
        raw = msgpack.packb(d, use_bin_type=True)
        back = BaseBackendMsg.decoder(msgpack.unpackb(raw, raw=False)).input_ids
        assert same(back, sample)


def test_only_1d_tensors_and_dataclasses_are_serialized() -> None:
    with pytest.raises(ValueError, match="only 1-D tensors"):
        UserMsg(uid=0, input_ids=torch.zeros(2, 3), sampling_params=SamplingParams()).encoder()
    with pytest.raises(TypeError, match="not a dataclass"):
        UserMsg(uid=0, input_ids=object(), sampling_params=SamplingParams()).encoder()  # type: ignore[arg-type]


def frame(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


TENSOR = {"__type__": "Tensor", "buffer": b"\x01\x00\x00\x00", "dtype": "torch.int32"}


@pytest.mark.parametrize(
    "raw, problem",
    [
        (b"\xc1", "not valid msgpack"),  # msgpack 里不用的字节
        (b"\x92\x01", "not valid msgpack"),  # 截断：说好两个元素的数组只有一个
        (b"\xa2\xff\xfe", "not valid msgpack"),  # 字符串不是 UTF-8
        (frame({"uid": 1}) + b"\x00", "not valid msgpack"),  # 后面多了字节
        (frame([1, 2]), "must be a dict"),
        (frame({"uid": 1}), "'__type__'"),
        (frame({"__type__": "UserReply", "uid": 1}), "unknown message type 'UserReply'"),
        (frame({"__type__": "dataclass"}), "unknown message type 'dataclass'"),  # 不是消息类
        (frame({"__type__": "AbortBackendMsg"}), r"missing \['uid'\]"),
        (frame({"__type__": "ExitMsg", "uid": 1}), r"unexpected \['uid'\]"),
        (frame({**TENSOR, "dtype": "torch.nonsense"}), "unknown dtype"),
        (frame({**TENSOR, "dtype": "torch.Tensor"}), "unknown dtype"),
        (frame({**TENSOR, "buffer": b"\x01\x00\x00"}), "not a whole number"),
        (frame({**TENSOR, "buffer": "1234"}), "must be bytes"),
    ],
)
def test_malformed_frames_raise_a_clear_decode_error(
    ipc_dir: str, raw: bytes, problem: str
) -> None:
    pull = ZmqPullQueue(ipc_addr(0, directory=ipc_dir), create=True, decoder=BaseBackendMsg.decoder)
    try:
        with pytest.raises(MessageDecodeError, match=problem):
            pull.decode(raw)
    finally:
        pull.stop()
    assert issubclass(MessageDecodeError, ValueError)  # 想笼统地接住它的代码照样能接住


def test_nested_unknown_type_is_reported_not_a_key_error() -> None:
    bad = {"__type__": "BatchFrontendMsg", "data": [{"__type__": "TokenizeMsg", "uid": 1}]}
    with pytest.raises(MessageDecodeError, match="unknown message type 'TokenizeMsg'"):
        BaseFrontendMsg.decoder(bad)
    # 每组只认识发给自己的消息：同一个 dict 交给 tokenizer 那一组就能解出来
    ok = TokenizeMsg(uid=1, text="hi", sampling_params=SamplingParams()).encoder()
    assert BaseTokenizerMsg.decoder(ok).text == "hi"
    with pytest.raises(MessageDecodeError):
        BaseBackendMsg.decoder(ok)


def test_zmq_push_pull_over_ipc(ipc_dir: str) -> None:
    addr = ipc_addr(0, directory=ipc_dir)
    pull = guard(ZmqPullQueue(addr, create=True, decoder=BaseTokenizerMsg.decoder))
    push = ZmqPushQueue(addr, create=False, encoder=BaseTokenizerMsg.encoder)
    msgs = [
        TokenizeMsg(
            uid=1, text=[{"role": "user", "content": "你好"}], sampling_params=SamplingParams()
        ),
        DetokenizeMsg(uid=1, next_token=42, finished=True),
    ] + [AbortMsg(uid=i) for i in range(100)]
    sender = threading.Thread(target=lambda: [push.put(m) for m in msgs])
    sender.start()
    got = [pull.get() for _ in msgs]
    sender.join()
    assert got == msgs  # 一个都不少，顺序不变
    assert pull.empty()
    push.stop()
    pull.stop()


def test_many_pushers_one_puller_keep_each_senders_order(ipc_dir: str) -> None:
    addr = ipc_addr(0, directory=ipc_dir)
    pull = guard(ZmqPullQueue(addr, create=True, decoder=BaseFrontendMsg.decoder))
    pushes = [ZmqPushQueue(addr, create=False, encoder=BaseFrontendMsg.encoder) for _ in range(3)]
    for k, push in enumerate(pushes):
        for i in range(20):
            push.put(UserReply(uid=k, incremental_output=str(i), finished=i == 19))
    got = [pull.get() for _ in range(60)]
    for k in range(3):  # 不同发送者之间交错，同一个发送者的消息按顺序到达
        assert [m.incremental_output for m in got if m.uid == k] == [str(i) for i in range(20)]
    for q in [*pushes, pull]:
        q.stop()


def test_async_push_pull(ipc_dir: str) -> None:
    addr = ipc_addr(0, directory=ipc_dir)

    async def main() -> list[BaseFrontendMsg]:
        pull = ZmqAsyncPullQueue(addr, create=True, decoder=BaseFrontendMsg.decoder)
        push = ZmqAsyncPushQueue(addr, create=False, encoder=BaseFrontendMsg.encoder)
        try:
            replies = [UserReply(uid=9, incremental_output=c, finished=c == "!") for c in "hi!"]
            # 收和发在同一个事件循环里并发：await 等消息时不阻塞发送的那个任务
            receiver = asyncio.ensure_future(
                asyncio.wait_for(asyncio.gather(*[pull.get() for _ in replies]), 10)
            )
            for r in replies:
                await push.put(r)
            return list(await receiver)
        finally:
            push.stop()
            pull.stop()

    got = asyncio.run(main())
    assert [(m.uid, m.incremental_output, m.finished) for m in got] == [
        (9, "h", False), (9, "i", False), (9, "!", True),
    ]  # fmt: skip


def test_rank0_forwards_raw_bytes_to_every_subscriber(ipc_dir: str) -> None:
    """rank 0 的做法：get_raw 取字节，put_raw 原样广播，再自己 decode。所有 rank 拿到同样的字节。"""
    from_tokenizer = ipc_addr(0, directory=ipc_dir)
    to_ranks = ipc_addr(1, directory=ipc_dir)
    pull = guard(ZmqPullQueue(from_tokenizer, create=True, decoder=BaseBackendMsg.decoder))
    push = ZmqPushQueue(from_tokenizer, create=False, encoder=BaseBackendMsg.encoder)
    pub = ZmqPubQueue(to_ranks, create=True, encoder=BaseBackendMsg.encoder)
    subs = [
        guard(ZmqSubQueue(to_ranks, create=False, decoder=BaseBackendMsg.decoder)) for _ in range(3)
    ]
    pub.wait_for_subscribers(3, timeout=HANG_GUARD_MS / 1000)

    msg = BatchBackendMsg(data=[user_msg(1, [5, 6, 7]), AbortBackendMsg(uid=0)])
    push.put(msg)
    raw = pull.get_raw()
    pub.put_raw(raw)
    mine = pull.decode(raw)
    raws = [s.socket.recv() for s in subs]
    assert raws == [raw] * 3  # 逐字节相同
    assert all(same(pull.decode(r), mine) for r in raws)
    assert same(mine, msg)
    for q in [push, pull, pub, *subs]:
        q.stop()


def test_plain_pub_drops_what_it_sends_before_a_subscription_arrives(ipc_dir: str) -> None:
    """慢订阅者：普通的 PUB 在订阅到达之前发的消息直接丢掉，也没法知道订阅什么时候到。

    为了让测试确定：丢的那一条在 SUB 存在之前发出——那时发布端没有任何订阅，一定丢。
    然后反复发"探针"直到 SUB 收到一条，证明订阅生效了；SUB 收到的第一条是探针，不是丢的那条。
    """
    addr = ipc_addr(0, directory=ipc_dir)
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(addr)
    pub.send(frame(ExitMsg().encoder()))  # 这一条注定丢掉
    sub = ZmqSubQueue(addr, create=False, decoder=BaseBackendMsg.decoder)
    for i in range(1000):  # 只防卡死：通常几轮之内订阅就生效了
        pub.send(frame(AbortBackendMsg(uid=i).encoder()))
        if sub.socket.poll(timeout=10):
            break
    else:
        pytest.fail("the subscription never took effect")
    first = sub.get()
    assert isinstance(first, AbortBackendMsg)  # 不是 ExitMsg：那一条没人收到
    while not sub.empty():
        assert isinstance(sub.get(), AbortBackendMsg)
    sub.stop()
    pub.close(linger=0)
    ctx.term()


def test_xpub_waits_for_subscribers_so_nothing_is_lost(ipc_dir: str) -> None:
    addr = ipc_addr(0, directory=ipc_dir)
    pub = ZmqPubQueue(addr, create=True, encoder=BaseBackendMsg.encoder)
    pub.put(ExitMsg())  # 同样注定丢掉：还没有订阅者
    subs = [
        guard(ZmqSubQueue(addr, create=False, decoder=BaseBackendMsg.decoder)) for _ in range(2)
    ]
    pub.wait_for_subscribers(2, timeout=HANG_GUARD_MS / 1000)
    assert pub.num_subscribers == 2
    # 等到之后紧接着发：不需要 sleep，也不需要探针，每个订阅者都收到每一条
    for i in range(5):
        pub.put(AbortBackendMsg(uid=i))
    for s in subs:
        assert [s.get() for _ in range(5)] == [AbortBackendMsg(uid=i) for i in range(5)]
        assert s.empty()
    for q in [pub, *subs]:
        q.stop()


def test_wait_for_subscribers_times_out_with_a_clear_error(ipc_dir: str) -> None:
    addr = ipc_addr(0, directory=ipc_dir)
    pub = ZmqPubQueue(addr, create=True, encoder=BaseBackendMsg.encoder)
    with pytest.raises(TimeoutError, match="only 0 of 1 subscribers"):
        pub.wait_for_subscribers(1, timeout=0.05)
    sub = ZmqSubQueue(addr, create=False, decoder=BaseBackendMsg.decoder)
    pub.wait_for_subscribers(1, timeout=HANG_GUARD_MS / 1000)
    with pytest.raises(TimeoutError, match="only 1 of 2 subscribers"):
        pub.wait_for_subscribers(2, timeout=0.05)
    for q in [pub, sub]:
        q.stop()


def test_stop_removes_the_socket_file_and_can_be_called_twice(ipc_dir: str) -> None:
    addrs = [ipc_addr(n, directory=ipc_dir) for n in range(4)]
    queues: list[Any] = [
        ZmqPullQueue(addrs[0], create=True, decoder=BaseBackendMsg.decoder),
        ZmqPushQueue(addrs[1], create=True, encoder=BaseBackendMsg.encoder),
        ZmqPubQueue(addrs[2], create=True, encoder=BaseBackendMsg.encoder),
        ZmqSubQueue(addrs[3], create=True, decoder=BaseBackendMsg.decoder),
    ]
    peer = ZmqPushQueue(addrs[0], create=False, encoder=BaseBackendMsg.encoder)
    peer.put(ExitMsg())  # 还有一条没人取的消息：linger=0，stop() 不会等它
    assert sorted(os.listdir(ipc_dir)) == sorted(os.path.basename(ipc_path(a)) for a in addrs)
    for q in [peer, *queues]:
        q.stop()
        q.stop()
        assert q.socket.closed and q.context.closed
    assert os.listdir(ipc_dir) == []  # bind 的一方删掉了自己的 socket 文件


def test_a_queue_never_stopped_does_not_hang_the_process(ipc_dir: str) -> None:
    """忘了 ``stop()`` 的发送端，消息送不出去（那个地址没有人 bind）：被垃圾回收时、解释器退出时，
    pyzmq 都会关掉它的 context；linger 若是默认的无限长，进程就卡在那里。在新的解释器里跑，
    卡住也只是这个子进程超时。"""
    code = textwrap.dedent(
        f"""
        import gc
        from minisgl.message import BaseBackendMsg, ExitMsg
        from minisgl.utils import ZmqPushQueue
        dropped = ZmqPushQueue("ipc://{ipc_dir}/nobody-a", False, BaseBackendMsg.encoder)
        dropped.put(ExitMsg())
        del dropped
        gc.collect()
        print("collected", flush=True)
        kept = ZmqPushQueue("ipc://{ipc_dir}/nobody-b", False, BaseBackendMsg.encoder)
        kept.put(ExitMsg())
        print("exiting", flush=True)
        """
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")])
    )
    # 卡住时 subprocess.run 杀掉子进程、抛 TimeoutExpired：测试失败
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["collected", "exiting"]


def test_ipc_addr_is_short_and_names_the_launching_process() -> None:
    addr = ipc_addr(3)
    assert addr == f"ipc:///tmp/minisgl_3.pid={os.getpid()}"
    assert ipc_path(addr) == f"/tmp/minisgl_3.pid={os.getpid()}"
    assert ipc_addr(0, pid=12) != ipc_addr(0, pid=13)  # 两个服务各自的地址不会相撞
    assert len(ipc_path(ipc_addr(99, pid=2**22))) < 40  # 离 103 字节的上限很远
    with pytest.raises(ValueError, match="longer than the 103 bytes"):
        ipc_addr(0, directory="/tmp/" + "x" * 100)
    with pytest.raises(ValueError, match="not an ipc address"):
        ipc_path("tcp://127.0.0.1:5555")
