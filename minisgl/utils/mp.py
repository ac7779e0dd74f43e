"""进程之间的队列：ZMQ socket + msgpack 的薄封装。

每个队列都是"编码器 + msgpack + 一个 socket"：``put(obj)`` 把对象交给 ``encoder`` 变成 dict，
msgpack 打包成字节发出去；``get()`` 收字节、解包、交给 ``decoder`` 变回对象。

- ``ZmqPushQueue`` / ``ZmqPullQueue``：管道，多个发送者、一个接收者，消息按顺序到达、不丢；
- ``ZmqAsyncPushQueue`` / ``ZmqAsyncPullQueue``：同样的管道，给 asyncio 事件循环里的 API Server 用；
- ``ZmqPubQueue`` / ``ZmqSubQueue``：广播，每个订阅者都收到一份；rank 0 用它转发给其他 rank。

``create=True`` 的一方 ``bind``（占住地址），另一方 ``connect``。地址用 ``ipc_addr`` 生成。
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Generic, TypeVar

import msgpack
import zmq
import zmq.asyncio

__all__ = [
    "IPC_PATH_MAX",
    "MessageDecodeError",
    "ZmqAsyncPullQueue",
    "ZmqAsyncPushQueue",
    "ZmqPubQueue",
    "ZmqPullQueue",
    "ZmqPushQueue",
    "ZmqSubQueue",
    "ipc_addr",
    "ipc_path",
]

T = TypeVar("T")
Encoder = Callable[[T], dict[str, Any]]
Decoder = Callable[[Any], T]

# Unix domain socket 的路径放在 sockaddr_un.sun_path 里：Linux 108 字节、macOS 104 字节，
# 都包括结尾的 '\0'。按小的那个算，路径最多 103 字节。
IPC_PATH_MAX = 103


class MessageDecodeError(ValueError):
    """收到的数据不是一条合法的消息：不是 msgpack、缺 ``__type__``、类名不认识、字段对不上……

    定义在这里而不是 ``minisgl.message``：队列解包（``_unpack``）时就要抛它，而 ``utils`` 在
    ``message`` 之下，不能反过来导入它。``minisgl.message`` 原样导出同一个类。
    """


def ipc_addr(n: int, *, directory: str = "/tmp", pid: int | None = None) -> str:
    """第 ``n`` 个 ipc 地址，形如 ``ipc:///tmp/minisgl_0.pid=1234``。

    ``pid`` 默认是当前进程：启动器在自己的进程里算好所有地址再交给子进程，于是同一台机器上
    起几个服务也不会撞到同一个地址。路径超过 ``IPC_PATH_MAX`` 时立刻报错，
    而不是等到 ``bind`` 时从 ZMQ 那里得到一个看不懂的错误。
    """
    path = f"{directory.rstrip('/')}/minisgl_{n}.pid={os.getpid() if pid is None else pid}"
    if len(path.encode()) > IPC_PATH_MAX:
        raise ValueError(
            f"ipc path {path!r} is {len(path.encode())} bytes, longer than the {IPC_PATH_MAX} "
            "bytes a Unix socket path may have; use a shorter directory"
        )
    return f"ipc://{path}"


def ipc_path(addr: str) -> str:
    """``ipc://`` 地址对应的文件路径（``bind`` 的一方会在那里建一个 socket 文件）。"""
    if not addr.startswith("ipc://"):
        raise ValueError(f"not an ipc address: {addr!r}")
    return addr.removeprefix("ipc://")


def _pack(obj: dict[str, Any]) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _unpack(raw: bytes) -> Any:
    try:
        return msgpack.unpackb(raw, raw=False)
    except Exception as e:  # msgpack 的各种格式错误、截断、多余的字节、非 UTF-8 的字符串
        raise MessageDecodeError(
            f"frame of {len(raw)} bytes is not valid msgpack ({type(e).__name__}: {e})"
        ) from e


class _ZmqQueue:
    """所有队列共有的部分：一个自己的 context、一个 socket，bind 或 connect，``stop`` 关掉。"""

    def __init__(
        self, addr: str, create: bool, kind: int, context: zmq.Context | None = None
    ) -> None:
        self.addr = addr
        # 每个队列一个自己的 context：stop() 可以放心地 term()，不会影响别的队列
        self.context: zmq.Context = context if context is not None else zmq.Context()
        self.socket: zmq.Socket = self.context.socket(kind)
        # linger 默认无限长：对方已经不在、消息送不出去时，关 context 会一直等下去。不只是
        # stop()：忘了 stop 的队列被垃圾回收、解释器退出时 pyzmq 也会关它的 context，同样卡住
        self.socket.setsockopt(zmq.LINGER, 0)
        self._socket_file: str | None = None  # bind 时建的 ipc socket 文件，stop() 时删掉
        try:
            self._setup()
            if create:
                self.socket.bind(addr)
                if addr.startswith("ipc://"):
                    self._socket_file = ipc_path(addr)
            else:
                self.socket.connect(addr)
        except BaseException:  # 地址不对、被占用……不要把半建好的 socket 和 context 留在身后
            self.stop()
            raise

    def _setup(self) -> None:
        """在 bind / connect 之前设置 socket 选项（子类覆盖）。"""

    def stop(self) -> None:
        """关掉 socket 和 context。可以调用多次。

        还没送出去的消息直接丢掉（建 socket 时就设了 ``linger=0``）：服务关闭时它们本来就没人要了。

        bind 的一方还要删掉 ipc socket 文件：libzmq 关闭 socket 时不删它（只删 ``ipc://*``
        自动生成的那种），不删的话 /tmp 里会越积越多。
        """
        if not self.socket.closed:
            self.socket.close()
        if not self.context.closed:
            self.context.term()
        if self._socket_file is not None:
            try:
                os.unlink(self._socket_file)
            except FileNotFoundError:  # 已经被删了（例如别人先清理了目录）
                pass
            self._socket_file = None


class ZmqPushQueue(_ZmqQueue, Generic[T]):
    """管道的发送端。"""

    def __init__(self, addr: str, create: bool, encoder: Encoder[T]) -> None:
        super().__init__(addr, create, zmq.PUSH)
        self.encoder = encoder

    def put(self, obj: T) -> None:
        self.socket.send(_pack(self.encoder(obj)), copy=False)


class ZmqPullQueue(_ZmqQueue, Generic[T]):
    """管道的接收端。``get_raw`` + ``decode`` 把"收"和"解码"拆开，rank 0 转发原始字节时用。"""

    def __init__(self, addr: str, create: bool, decoder: Decoder[T]) -> None:
        super().__init__(addr, create, zmq.PULL)
        self.decoder = decoder

    def get(self) -> T:
        """阻塞，直到收到一条消息。"""
        return self.decode(self.socket.recv())

    def get_raw(self) -> bytes:
        """收一条消息的原始字节，不解码。"""
        return self.socket.recv()

    def decode(self, raw: bytes) -> T:
        return self.decoder(_unpack(raw))

    def empty(self) -> bool:
        """现在有没有已经到达、还没取走的消息（不等待）。"""
        return self.socket.poll(timeout=0) == 0


class ZmqAsyncPushQueue(_ZmqQueue, Generic[T]):
    """asyncio 版的发送端：``await q.put(obj)`` 不会阻塞事件循环。"""

    def __init__(self, addr: str, create: bool, encoder: Encoder[T]) -> None:
        super().__init__(addr, create, zmq.PUSH, context=zmq.asyncio.Context())
        self.encoder = encoder

    async def put(self, obj: T) -> None:
        await self.socket.send(_pack(self.encoder(obj)), copy=False)


class ZmqAsyncPullQueue(_ZmqQueue, Generic[T]):
    """asyncio 版的接收端：``await q.get()`` 等消息时，事件循环照常处理别的连接。"""

    def __init__(self, addr: str, create: bool, decoder: Decoder[T]) -> None:
        super().__init__(addr, create, zmq.PULL, context=zmq.asyncio.Context())
        self.decoder = decoder

    async def get(self) -> T:
        raw = await self.socket.recv()
        return self.decoder(_unpack(raw))


class ZmqPubQueue(_ZmqQueue, Generic[T]):
    """广播的发送端。用 XPUB 而不是 PUB：XPUB 收得到"有人订阅了"的通知，可以等订阅者到齐再发。

    PUB/SUB 的经典陷阱"慢订阅者"（slow joiner）：SUB 的订阅要在连接建立之后才异步送到发布端，
    在那之前发布的消息，发布端认为"没人订阅"，直接丢掉。``wait_for_subscribers(n)`` 一直等到
    n 个订阅都已经生效，之后发的每一条，这 n 个订阅者都一定收得到。
    """

    def __init__(self, addr: str, create: bool, encoder: Encoder[T]) -> None:
        super().__init__(addr, create, zmq.XPUB)
        self.encoder = encoder
        self._subscribers = 0

    def _setup(self) -> None:
        # XPUB 默认把相同主题的订阅合并成一条通知（第二个订阅 "" 的人不会再通知）。
        # VERBOSE：每个订阅者的订阅通知都要；VERBOSER：退订（包括断开连接）的通知也每个都要。
        self.socket.setsockopt(zmq.XPUB_VERBOSE, 1)
        self.socket.setsockopt(zmq.XPUB_VERBOSER, 1)
        # 发送缓冲满（默认 1000 条）时，PUB/XPUB 默认悄悄丢掉新消息。广播之前各 rank 已经约好了
        # "这一步有几条"，丢一条，收的一方就永远等下去；NODROP 让发送方等，而不是丢
        self.socket.setsockopt(zmq.XPUB_NODROP, 1)

    @property
    def num_subscribers(self) -> int:
        """按已经处理过的通知算出的订阅者数；还在路上的通知要等下一次 ``wait_for_subscribers``。"""
        return self._subscribers

    def wait_for_subscribers(self, n: int, timeout: float | None = None) -> None:
        """等到至少 ``n`` 个订阅者的订阅生效。``timeout`` 秒内等不到就抛 ``TimeoutError``。"""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while self.socket.poll(timeout=0):  # 先把已经到达的通知都处理掉，包括退订
                self._on_notification(self.socket.recv())
            if self._subscribers >= n:
                return
            wait_ms = None
            if deadline is not None:
                wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
            if self.socket.poll(timeout=wait_ms) == 0:
                raise TimeoutError(
                    f"only {self._subscribers} of {n} subscribers joined {self.addr} "
                    f"within {timeout} s"
                )

    def _on_notification(self, note: bytes) -> None:
        # XPUB 收到的不是数据，是通知：b"\x01" + 主题 是订阅，b"\x00" + 主题 是退订
        if note[:1] == b"\x01":
            self._subscribers += 1
        elif note[:1] == b"\x00":
            self._subscribers -= 1

    def put(self, obj: T) -> None:
        self.socket.send(_pack(self.encoder(obj)), copy=False)

    def put_raw(self, raw: bytes) -> None:
        """原样发出已经编码好的字节（rank 0 转发从 tokenizer 收到的消息）。"""
        self.socket.send(raw, copy=False)


class ZmqSubQueue(_ZmqQueue, Generic[T]):
    """广播的接收端，订阅全部消息（主题 ""）。"""

    def __init__(self, addr: str, create: bool, decoder: Decoder[T]) -> None:
        super().__init__(addr, create, zmq.SUB)
        self.decoder = decoder

    def _setup(self) -> None:
        self.socket.setsockopt(zmq.SUBSCRIBE, b"")  # 订阅写在连接之前：连上就带着订阅

    def get(self) -> T:
        return self.decoder(_unpack(self.socket.recv()))

    def empty(self) -> bool:
        return self.socket.poll(timeout=0) == 0


# >> ch17
import re
import stat

import psutil

_IPC_FILE_NAME = re.compile(r"minisgl_\d+\.pid=(\d+)")  # ipc_addr 生成的文件名


def remove_stale_ipc_files(directory: str = "/tmp") -> list[str]:
    """删掉 ``directory`` 里主进程已经不在了的 ipc socket 文件，返回删掉的路径。

    主进程被 SIGKILL 时谁也来不及收拾：它自己什么都做不了，子进程被内核一并杀掉，bind 出来的
    socket 文件留在目录里，再也没有人删。文件名里带着主进程的 PID（``ipc_addr``），服务启动时
    扫一遍：PID 已经不存在的就是残留。PID 还在的不碰——那可能是同一台机器上另一个正在运行的服务。
    """
    removed: list[str] = []
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:  # 目录不存在或读不了：没有什么可清理的
        return removed
    for entry in entries:
        m = _IPC_FILE_NAME.fullmatch(entry.name)
        if m is None or psutil.pid_exists(int(m.group(1))):
            continue
        try:
            # 只删 socket：同名的普通文件不是 bind 建的
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                os.unlink(entry.path)
                removed.append(entry.path)
        except OSError:  # 刚被别人删掉，或者属于别的用户
            pass
    return removed


__all__ += ["remove_stale_ipc_files"]
# << ch17
