"""本地评测的子进程：在沙箱里运行 ``judge_core.grade``，结果经一条签名的管道交给 ``judge.py``。

``judge.py`` 在一个新会话里、以评测专用的临时目录为工作目录这样启动它::

    python -X utf8 -B judge_sandbox.py FD

FD 是结果管道的写端。请求（代码、测试源码、限额、一把 32 字节的随机密钥）从标准输入读进来，
读完标准输入就换成 /dev/null，所以命令行、环境变量、文件里都找不到密钥。接下来按顺序：

1. 资源限额：单个文件的大小、不写 core 文件；
2. Linux 上能用就用（都不需要 root）：

   - Landlock：只许写临时目录和 /dev，仓库里的文件（题目、测试、评测器、虚拟环境）一律写不了；
     内核够新（ABI ≥ 6）时还不许向沙箱外的进程发信号、不许连沙箱外的抽象 Unix 套接字；
   - seccomp：只许向自己（和自己的进程组）发信号，不许 ptrace、读写别的进程的内存、
     setsid/setpgid（离开进程组就躲过了父进程的 killpg）、mount 之类；

3. 导入测试文件用到的第三方模块（torch 之类）：这段时间不算进时限；
4. 内存上限：在已经用掉的基础上再给 N MiB（RLIMIT_DATA）；
5. 装审计钩子（``sys.addaudithook``，装上就拆不掉）。密钥只在这个钩子的闭包里。
   ``judge_core._grade`` 每走一步发一个进度事件（``judge_core.PROGRESS_EVENT``），钩子核对事件
   确实出自那一帧，把内容编码、编号、用密钥做 BLAKE2b 签名后写进管道；收到 ``done`` 写完立刻
   ``os._exit(0)``：此后不再运行任何读者代码（atexit、析构函数、后台线程都没有机会）。
   每条消息发出前核对评测器自己的函数和类没有被换掉（身份和 ``__code__``）。
   读者代码运行期间，钩子还拦下几种只有改评测器才用得上的操作（gc 反查引用、settrace/setprofile、
   ctypes、冒充评测器发进度事件），遇到就报告“评测结果无效”并立刻结束。

父进程（``judge.py``）核对签名、编号，以及结果是不是恰好对应它发出去的那些测试。

只用标准库；ctypes 只在第 2 步用（读者代码运行时它已被钩子拦下）。
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import threading
import traceback
import types
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))

MAC_BYTES = 32
MAX_FRAME = 1 << 20  # 一条消息最多多大：测试的信息和输出都有上限，正常远远用不到
REQUEST_HEADER = 8  # 请求前面是 8 字节的长度
THREAD_STACK = 64 << 20  # 评测线程的栈：深一点的递归也够用

# 读者代码运行期间拦下的审计事件：正常的答案用不到它们，用它们只能是想改动评测器本身
_BLOCKED_EVENTS = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._current_frames",
        "sys.settrace",
        "sys.setprofile",
        "sys._settraceallthreads",
        "sys._setprofileallthreads",
        "sys.addaudithook",
    }
)
_BLOCKED_PREFIXES = ("ctypes.", "sys.monitoring")


# ---------------------------------------------------------------- 结果通道的格式（父子进程共用）


class ChannelError(Exception):
    """结果管道上的数据不是评测器写的（签名不对、编号不对、格式不对）。"""


def frame_mac(key: bytes, seq: int, payload: bytes) -> bytes:
    """第 seq 条消息的签名：以密钥为键的 BLAKE2b（keyed BLAKE2 本身就是 MAC）。"""
    mac = hashlib.blake2b(key=key, digest_size=MAC_BYTES)
    mac.update(seq.to_bytes(8, "big"))
    mac.update(payload)
    return mac.digest()


class FrameReader:
    """父进程这边：把管道里读到的字节切成消息，逐条核对签名与编号。

    每条消息是 4 字节长度 + 32 字节签名 + JSON 数组（只含字符串和布尔值）。
    """

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._buffer = bytearray()
        self._seq = 0

    def feed(self, data: bytes) -> list[list[Any]]:
        self._buffer += data
        messages = []
        head = 4 + MAC_BYTES
        while len(self._buffer) >= head:
            size = int.from_bytes(self._buffer[:4], "big")
            if size > MAX_FRAME:
                raise ChannelError(f"结果通道上出现了 {size} 字节的消息，超过上限")
            if len(self._buffer) < head + size:
                break
            mac = bytes(self._buffer[4:head])
            payload = bytes(self._buffer[head : head + size])
            del self._buffer[: head + size]
            if not hmac.compare_digest(mac, frame_mac(self._key, self._seq, payload)):
                raise ChannelError(f"结果通道上第 {self._seq + 1} 条消息的签名不对：不是评测器写的")
            self._seq += 1
            try:
                message = json.loads(payload.decode("ascii"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise ChannelError(f"结果通道上的消息不是合法的 JSON：{exc}") from None
            if (
                not isinstance(message, list)
                or not message
                or not all(isinstance(x, (str, bool)) for x in message)
            ):
                raise ChannelError("结果通道上的消息格式不对")
            messages.append(message)
        return messages

    @property
    def leftover(self) -> int:
        """还没凑成一条完整消息的字节数。"""
        return len(self._buffer)


def encode_request(request: dict[str, Any]) -> bytes:
    payload = json.dumps(request, ensure_ascii=False).encode("utf-8")
    return len(payload).to_bytes(REQUEST_HEADER, "big") + payload


# ---------------------------------------------------------------- 限额


def _set_rlimit(resource: Any, which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _limit_files(file_mb: int) -> None:
    try:
        import resource
    except ImportError:
        return
    for which, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, file_mb << 20)):
        try:
            _set_rlimit(resource, which, value)
        except (ValueError, OSError):
            pass


def _vm_data() -> int:
    """已经用掉的“数据段”内存（字节）：堆、匿名映射、线程栈。读不到时为 0。"""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _limit_memory(memory_mb: int) -> str:
    """在已经用掉的基础上再给 memory_mb MiB。

    用 RLIMIT_DATA 而不是 RLIMIT_AS：torch 等库会预留大片不可写的地址空间，RLIMIT_AS 会误伤它们；
    RLIMIT_DATA 只算真正可写的私有内存（Linux 4.7 起对 mmap 也生效）。
    """
    try:
        import resource
    except ImportError:
        return "内存上限：不可用（没有 resource 模块）"
    which = getattr(resource, "RLIMIT_DATA", None)
    if which is None:
        return "内存上限：不可用"
    used = _vm_data()
    try:
        _set_rlimit(resource, which, used + (memory_mb << 20))
    except (ValueError, OSError) as exc:
        return f"内存上限：没能设置（{exc}）"
    return f"内存上限：启动后再用 {memory_mb} MiB"


# ---------------------------------------------------------------- Landlock 与 seccomp（Linux）

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22

# Landlock 的系统调用号在各个架构上相同
_LANDLOCK_CREATE_RULESET = 444
_LANDLOCK_ADD_RULE = 445
_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_VERSION_FLAG = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
# 各种“写”权限：删除、创建、改名、写入、截断。读和执行不限制
_LL_WRITE_V1 = (
    (1 << 1)  # WRITE_FILE
    | (1 << 4)  # REMOVE_DIR
    | (1 << 5)  # REMOVE_FILE
    | (1 << 6)  # MAKE_CHAR
    | (1 << 7)  # MAKE_DIR
    | (1 << 8)  # MAKE_REG
    | (1 << 9)  # MAKE_SOCK
    | (1 << 10)  # MAKE_FIFO
    | (1 << 11)  # MAKE_BLOCK
    | (1 << 12)  # MAKE_SYM
)
_LL_REFER = 1 << 13  # ABI 2
_LL_TRUNCATE = 1 << 14  # ABI 3
_LL_SCOPE = 1 | 2  # ABI 6：抽象 Unix 套接字、信号都不许越出沙箱


def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def _no_new_privs(libc: Any) -> bool:
    import ctypes

    ul = ctypes.c_ulong
    return libc.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ul(1), ul(0), ul(0), ul(0)) == 0


def _errno_text() -> str:
    import ctypes

    return os.strerror(ctypes.get_errno())


def landlock(writable: list[str]) -> str:
    """只允许写 writable 里的目录（连同其下所有文件）。返回空串表示成功，否则是没能启用的原因。"""
    if not sys.platform.startswith("linux"):
        return "不是 Linux"
    try:
        import ctypes

        libc = _libc()
    except (ImportError, OSError) as exc:
        return f"没有 ctypes/libc（{exc}）"
    c_long, c_int, c_u32, c_u64 = ctypes.c_long, ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64
    abi = libc.syscall(c_long(_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                       c_u32(_LANDLOCK_VERSION_FLAG))  # fmt: skip
    if abi < 1:
        return f"内核不支持（{_errno_text()}）"

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", c_u64), ("net", c_u64), ("scoped", c_u64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", c_u64), ("parent_fd", ctypes.c_int32)]

    handled = _LL_WRITE_V1 | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    attr = RulesetAttr(handled, 0, _LL_SCOPE if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(c_long(_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                           ctypes.c_size_t(size), c_u32(0))  # fmt: skip
    if ruleset < 0:
        return f"建不了规则集（{_errno_text()}）"
    try:
        for path in writable:
            parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneath(handled, parent)
                added = libc.syscall(c_long(_LANDLOCK_ADD_RULE), c_int(ruleset),
                                     c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                                     c_u32(0))  # fmt: skip
            finally:
                os.close(parent)
            if added != 0:
                return f"加不了 {path} 的规则（{_errno_text()}）"
        if not _no_new_privs(libc):
            return f"设置不了 no_new_privs（{_errno_text()}）"
        if libc.syscall(c_long(_LANDLOCK_RESTRICT_SELF), c_int(ruleset), c_u32(0)) != 0:
            return f"启用失败（{_errno_text()}）"
    finally:
        os.close(ruleset)
    return ""


# 每个架构：审计用的架构号、seccomp 的系统调用号、要检查参数的调用、一律拒绝的调用
_SECCOMP_ARCH = {
    "x86_64": {
        "audit_arch": 0xC000003E,
        "x32": True,
        "seccomp": 317,
        "kill": (62, 129),  # kill、rt_sigqueueinfo：第一个参数是 pid
        "self": (200, 234, 297),  # tkill、tgkill、rt_tgsigqueueinfo：第一个参数是线程（组）号
        "fcntl": 72,
        "ioctl": 16,
        # ptrace、process_vm_readv/writev、pidfd_send_signal、pidfd_getfd、setsid、setpgid、
        # unshare、setns、mount、umount2、pivot_root、chroot、open_tree、move_mount、fsopen、
        # fsmount、mount_setattr、kexec_load、init_module、finit_module、delete_module、reboot
        "deny": (
            101,
            310,
            311,
            424,
            438,
            112,
            109,
            272,
            308,
            165,
            166,
            155,
            161,
            428,
            429,
            430,
            432,
            442,
            246,
            175,
            313,
            176,
            169,
        ),  # fmt: skip
    },
    "aarch64": {
        "audit_arch": 0xC00000B7,
        "x32": False,
        "seccomp": 277,
        "kill": (129, 138),
        "self": (130, 131, 240),
        "fcntl": 25,
        "ioctl": 29,
        "deny": (
            117,
            270,
            271,
            424,
            438,
            157,
            154,
            97,
            268,
            40,
            39,
            41,
            51,
            428,
            429,
            430,
            432,
            442,
            104,
            105,
            273,
            106,
            142,
        ),  # fmt: skip
    },
}
_F_SETOWN, _F_SETOWN_EX = 8, 15  # 让内核把 SIGIO 发给别的进程
# FIOSETOWN、SIOCSPGRP（同上）、TIOCSTI（往终端里塞输入）、
# FS_IOC_SETFLAGS、FS_IOC_FSSETXATTR（chattr +i 之类）
_DENIED_IOCTLS = (0x8901, 0x8902, 0x5412, 0x40086602, 0x401C5820)


def _seccomp_program(table: dict[str, Any], pid: int) -> list[tuple[int, int, int, int]]:
    """生成 classic BPF 过滤程序：指令是 (code, jt, jf, k)，跳转目标先写成标签再换算成偏移。"""
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW、SECCOMP_RET_ERRNO | EPERM
    nr, arch, arg0, arg1 = 0, 4, 16, 24  # struct seccomp_data 里的偏移（参数取低 32 位）
    me, minus_me = pid & 0xFFFFFFFF, (-pid) & 0xFFFFFFFF
    code: list[tuple[int, Any, Any, int]] = [
        (ld, 0, 0, arch),
        (jeq, 0, "deny", table["audit_arch"]),
    ]
    code.append((ld, 0, 0, nr))
    if table["x32"]:
        code.append((jge, "deny", 0, 0x40000000))  # x32 ABI 的调用号
    code += [(jeq, "deny", 0, n) for n in table["deny"]]
    code += [(jeq, "kill", 0, n) for n in table["kill"]]
    code += [(jeq, "self", 0, n) for n in table["self"]]
    code += [(jeq, "fcntl", 0, table["fcntl"]), (jeq, "ioctl", 0, table["ioctl"])]
    code.append((ret, 0, 0, allow))
    labels = {"kill": len(code)}
    code += [(ld, 0, 0, arg0), (jeq, "allow", 0, me), (jeq, "allow", 0, 0)]
    code.append((jeq, "allow", "deny", minus_me))  # kill(0)、kill(-自己的进程组) 也行
    labels["self"] = len(code)
    code += [(ld, 0, 0, arg0), (jeq, "allow", "deny", me)]
    labels["fcntl"] = len(code)
    code += [(ld, 0, 0, arg1), (jeq, "deny", 0, _F_SETOWN), (jeq, "deny", "allow", _F_SETOWN_EX)]
    labels["ioctl"] = len(code)
    code.append((ld, 0, 0, arg1))
    code += [(jeq, "deny", 0, n) for n in _DENIED_IOCTLS[:-1]]
    code.append((jeq, "deny", "allow", _DENIED_IOCTLS[-1]))
    labels["allow"] = len(code)
    code.append((ret, 0, 0, allow))
    labels["deny"] = len(code)
    code.append((ret, 0, 0, deny))

    def offset(target: Any, index: int) -> int:
        return 0 if target == 0 else labels[target] - index - 1

    return [(c, offset(t, i), offset(f, i), k) for i, (c, t, f, k) in enumerate(code)]


def seccomp() -> str:
    """装 seccomp 过滤器（对本进程所有线程和以后的子孙进程生效）。返回空串表示成功，否则是原因。"""
    if not sys.platform.startswith("linux"):
        return "不是 Linux"
    machine = os.uname().machine.lower()
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    table = _SECCOMP_ARCH.get(name)
    try:
        import ctypes

        libc = _libc()
    except (ImportError, OSError) as exc:
        return f"没有 ctypes/libc（{exc}）"
    if table is None or ctypes.sizeof(ctypes.c_void_p) != 8:
        return f"不支持的架构 {machine}"

    class SockFilter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    program = _seccomp_program(table, os.getpid())
    filters = (SockFilter * len(program))(*[SockFilter(*ins) for ins in program])
    prog = SockFprog(len(program), ctypes.cast(filters, ctypes.POINTER(SockFilter)))
    if not _no_new_privs(libc):
        return f"设置不了 no_new_privs（{_errno_text()}）"
    # SECCOMP_SET_MODE_FILTER，SECCOMP_FILTER_FLAG_TSYNC：已经存在的线程也一并装上
    done = libc.syscall(ctypes.c_long(table["seccomp"]), ctypes.c_uint(1), ctypes.c_uint(1),
                        ctypes.byref(prog))  # fmt: skip
    if done != 0:
        ul = ctypes.c_ulong
        done = libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), ul(2), ctypes.byref(prog), ul(0), ul(0))
    if done != 0:
        return f"启用失败（{_errno_text()}）"
    return ""


# ---------------------------------------------------------------- 审计钩子


def _function_table(namespaces: list[dict[str, Any]]) -> tuple[tuple[dict[str, Any], dict], ...]:
    """每个命名空间里的函数和类：名字 → (对象, 函数的代码对象)。

    之后按身份核对，对象或代码被换掉了，就是有人改动了评测器。
    """
    tables = []
    for namespace in namespaces:
        entries = {
            k: (v, v.__code__ if isinstance(v, types.FunctionType) else None)
            for k, v in namespace.items()
            if type(k) is str and isinstance(v, (type, types.FunctionType))
        }
        tables.append((namespace, entries))
    return tuple(tables)


def install_hook(key: bytes, fd: int, start_info: tuple[bool, bool, str]) -> None:
    """装上收发进度事件的审计钩子（见模块说明）。

    钩子的闭包里有签名用的对象，所以读者代码绝不能在钩子的帧还在栈上时运行，否则它顺着
    ``sys._getframe().f_back`` 就能拿到。为此：

    - 钩子只用装钩子之前存下的 C 实现的函数，不调用读者能换掉的 Python 函数，
      也不对读者的对象调用方法；
    - 做事之前先关掉 gc（免得回收读者的对象时运行它的 ``__del__``），做完再打开；
    - 评测在一个单独的线程里进行（见 main），信号处理函数只在主线程运行，而读者代码在别的线程里
      根本装不了信号处理函数；
    - 读者代码开始运行后，不许再添加审计钩子（它会在钩子自己触发的事件里被调用）。
    """
    import _json
    import _thread
    import gc

    import judge_core

    base = hashlib.blake2b(key=key, digest_size=MAC_BYTES)
    encode = _json.encode_basestring_ascii
    write, exit_, getframe, get_ident = os.write, os._exit, sys._getframe, _thread.get_ident
    gc_enabled, gc_disable, gc_enable = gc.isenabled, gc.disable, gc.enable
    str_, bool_, type_, len_, tuple_ = str, bool, type, len, tuple
    event_name = judge_core.PROGRESS_EVENT
    grade_code = judge_core._grade.__code__
    main = sys.modules["__main__"]
    tables = _function_table([judge_core.__dict__, main.__dict__])
    missing = object()
    blocked, prefixes = _BLOCKED_EVENTS, _BLOCKED_PREFIXES
    landlock_ok, seccomp_ok, info = start_info
    # [进度事件应当来自的那一帧, 下一条消息的编号, 正在钩子里的线程]
    state: list[Any] = [None, 0, 0]

    def send(items: tuple[Any, ...]) -> bool:
        parts = []
        for item in items:
            kind = type_(item)
            if kind is str_:
                parts.append(encode(item))
            elif kind is bool_:
                parts.append("true" if item else "false")
            else:
                return False
        payload = ("[" + ",".join(parts) + "]").encode("ascii")
        seq = state[1]
        state[1] = seq + 1
        mac = base.copy()
        mac.update(seq.to_bytes(8, "big"))
        mac.update(payload)
        data = len_(payload).to_bytes(4, "big") + mac.digest() + payload
        while data:
            data = data[write(fd, data) :]
        return True

    def fail(reason: str) -> None:
        try:
            send(("invalid", reason))
        finally:
            exit_(3)

    def replaced_name() -> str:
        for namespace, expected in tables:
            seen = 0
            for name, value in namespace.items():
                if type_(name) is str_:
                    obj, code = expected.get(name, (missing, None))
                    if obj is not missing:
                        seen += 1
                        if value is not obj:
                            return name
                        if code is not None and obj.__code__ is not code:
                            return f"{name} 的代码"
            if seen != len_(expected):
                return "（有函数被删掉了）"
        return ""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        me = get_ident()
        if state[2] == me:
            return  # 钩子自己触发的事件（比如 sys._getframe）
        if event == event_name:
            collecting = gc_enabled()
            gc_disable()
            state[2] = me
            try:
                caller = getframe(1)
                if state[0] is None:
                    if caller.f_code is not grade_code:
                        fail("有代码冒充评测器发出进度消息")
                    state[0] = caller
                    send(("start", landlock_ok, seccomp_ok, info))
                    return
                if caller is not state[0] or type_(args) is not tuple_ or not args:
                    fail("有代码冒充评测器发出进度消息（不是 judge_core._grade 那一帧）")
                name = replaced_name()
                if name:
                    fail(f"评测器自己的 {name} 在评测中被替换了")
                if not send(args):
                    fail("评测器要发的消息里有不是字符串的东西（评测器的函数被改动了？）")
                if args[0] == "done":
                    exit_(0)
            except BaseException:
                exit_(5)  # 发不出去（父进程不在了、内存不够……）：宁可崩溃，也不让读者代码接着跑
            finally:
                state[2] = 0
                if collecting:
                    gc_enable()
            return
        if state[0] is not None and (event in blocked or event.startswith(prefixes)):
            gc_disable()
            state[2] = me
            fail(f"读者代码用了 {event}：评测时不允许（正常的答案用不到，它只能用来改动评测器）")

    sys.addaudithook(hook)


# ---------------------------------------------------------------- 入口


def _read_exact(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("请求没有读完整")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_request() -> dict[str, Any]:
    size = int.from_bytes(_read_exact(0, REQUEST_HEADER), "big")
    request = json.loads(_read_exact(0, size).decode("utf-8"))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return request


def _preload(names: list[str]) -> None:
    """导入测试要用的第三方模块。失败不要紧：测试自己导入时会报出同样的错误。"""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 —— 包括 SystemExit：这里不能让子进程退出
            pass


def main(argv: list[str]) -> None:
    if len(argv) != 1 or not argv[0].isdigit():
        print("用法：python judge_sandbox.py FD（由 judge.py 调用）", file=sys.stderr)
        os._exit(2)
    fd = int(argv[0])
    try:
        os.set_inheritable(fd, False)  # 读者代码启动的程序拿不到结果管道
        request = _read_request()
        key = bytes.fromhex(request.pop("key"))
        import judge_core

        # 读者代码不该 import 到评测器自己的文件
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

        _limit_files(int(request["file_mb"]))
        landlock_error = seccomp_error = "没有要求"
        if request.get("landlock", True):
            landlock_error = landlock([os.getcwd(), "/dev"])
        if request.get("seccomp", True):
            seccomp_error = seccomp()
        _preload(list(request.get("preload", [])))
        memory = _limit_memory(int(request["memory_mb"]))
        info = "；".join(
            [
                f"Landlock：{landlock_error or '已启用'}",
                f"seccomp：{seccomp_error or '已启用'}",
                memory,
            ]
        )
        tests = judge_core._tests_from_json(request["tests"])
        install_hook(key, fd, (not landlock_error, not seccomp_error, info))
        del key
        # 在单独的线程里评测：信号处理函数只在主线程运行，读者代码也只能在主线程里装信号处理函数，
        # 这样它就没法在钩子运行到一半时插进来（见 install_hook）
        threading.stack_size(THREAD_STACK)
        worker = threading.Thread(
            target=_grade, args=(judge_core, request["code"], tests), name="judge", daemon=True
        )
        worker.start()
        worker.join()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(4)
    os._exit(4)  # 评测线程没有正常结束（_grade 里已经报告了原因）


def _grade(judge_core: Any, code: str, tests: list[Any]) -> None:
    """评测线程。正常情况下钩子收到 done 就结束了整个进程，这个函数不会返回。"""
    try:
        judge_core.grade(code, tests)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    else:
        print("评测没有正常结束（进度事件没有送达）", file=sys.stderr)
    sys.stderr.flush()
    os._exit(4)


if __name__ == "__main__":
    main(sys.argv[1:])
