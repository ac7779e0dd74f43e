"""服务的全部参数：调度器的配置，加上前端（HTTP、tokenizer 进程、进程间地址）的几项。

``ServerArgs`` 继承 ``SchedulerConfig``：启动器把同一个对象（换掉 ``tp_info``）交给每个调度器
进程，调度器只看它认识的字段，前端的字段它用不到也不碍事。

进程间的 ZMQ 地址都在主进程里算好（``ipc:///tmp/minisgl_N.pid=主进程的 PID``），再随参数传给
子进程。谁 bind、谁 connect 是固定的：

==========================  ===========================  ==================================
地址                        bind（占住地址）的一方        connect 的一方
==========================  ===========================  ==================================
``zmq_backend_addr``        调度器 rank 0（PULL）          tokenizer（PUSH）；关闭时的启动器
``zmq_detokenizer_addr``    detokenizer（PULL）            调度器 rank 0（PUSH）
``zmq_broadcast_addr``      调度器 rank 0（XPUB）          rank ≥ 1（SUB），只在 tp > 1 时用
``zmq_frontend_addr``       API Server（PULL）             detokenizer（PUSH）
``zmq_tokenizer_addr``      见 ``tokenizer_create_addr``   API Server 与 tokenizer
==========================  ===========================  ==================================
"""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from minisgl.scheduler import SchedulerConfig
from minisgl.utils import dtype_from_str, ipc_addr, ipc_path

__all__ = ["DEFAULT_MODEL", "ServerArgs", "parse_args"]

# 不给 --model 时服务的模型：书里训练的演示对话模型，tools/make_tiny_model.py 把它生成在仓库的
# models/ 下（make run、make test 都会先生成）
DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "models" / "demo-chat"


def _free_tcp_port(host: str = "127.0.0.1") -> int:
    """让内核挑一个空闲端口（bind 到 0 端口），马上放掉，交给 torch.distributed 用。"""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class ServerArgs(SchedulerConfig):
    """``SchedulerConfig`` 的全部字段，加上前端的。"""

    host: str = "127.0.0.1"
    port: int = 1919  # 0：让内核挑一个空闲端口，日志里打印实际的端口
    # tokenizer 进程数。0（默认）：一个进程既分词又反分词；N > 0：N 个分词进程 + 1 个反分词进程
    num_tokenizer: int = 0
    silent_output: bool = False  # 调度器不打 INFO 日志（交互模式用：别把对话刷掉）
    shell: bool = False  # 不起 HTTP 服务，在终端里对话
    zmq_frontend_addr: str | None = None  # detokenizer → API Server
    zmq_tokenizer_addr: str | None = None  # API Server → tokenizer

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_tokenizer < 0:
            raise ValueError(f"num_tokenizer must be >= 0, got {self.num_tokenizer}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        # 没给的地址现在就算好。dataclasses.replace 会再调一次 __post_init__，已有的地址保持不变
        if self.zmq_backend_addr is None:
            self.zmq_backend_addr = ipc_addr(0)
        if self.zmq_detokenizer_addr is None:
            self.zmq_detokenizer_addr = ipc_addr(1)
        if self.zmq_broadcast_addr is None and self.tp_info.size > 1:
            self.zmq_broadcast_addr = ipc_addr(2)
        if self.zmq_frontend_addr is None:
            self.zmq_frontend_addr = ipc_addr(3)
        if self.zmq_tokenizer_addr is None:
            # 共用一个 tokenizer 时，API Server 直接发到 detokenizer 的地址：那个进程什么都做
            self.zmq_tokenizer_addr = (
                self.zmq_detokenizer_addr if self.share_tokenizer else (ipc_addr(4))
            )
        if self.dist_init_addr is None and self.tp_info.size > 1:
            self.dist_init_addr = f"tcp://127.0.0.1:{_free_tcp_port()}"

    @property
    def share_tokenizer(self) -> bool:
        """分词和反分词在同一个进程里（``num_tokenizer == 0``）。"""
        return self.num_tokenizer == 0

    @property
    def tokenizer_create_addr(self) -> bool:
        """tokenizer 进程要不要 bind ``zmq_tokenizer_addr``。

        共用时那个地址就是 detokenizer 的地址，由它 bind；N 个 tokenizer 时由 API Server 的 PUSH
        bind，N 个 PULL 去 connect——PUSH 在所有连上来的 PULL 之间轮流分发，N 个进程分担分词。
        """
        return self.share_tokenizer

    @property
    def ipc_files(self) -> list[str]:
        """所有 ipc 地址对应的 socket 文件：关闭时确认它们都不在了。"""
        addrs = [
            self.zmq_backend_addr,
            self.zmq_detokenizer_addr,
            self.zmq_broadcast_addr,
            self.zmq_frontend_addr,
            self.zmq_tokenizer_addr,
        ]
        return sorted({ipc_path(a) for a in addrs if a is not None and a.startswith("ipc://")})


def _build_parser() -> argparse.ArgumentParser:
    d = ServerArgs  # 默认值以 dataclass 为准，命令行不另写一份
    p = argparse.ArgumentParser(
        prog="python -m minisgl",
        description="mini-sglang：兼容 OpenAI 接口的推理服务（--shell：终端里的交互式对话）",
    )
    p.add_argument(
        "--model",
        "--model-path",
        dest="model_path",
        default=None,
        help="本地文件夹或 Hugging Face 上的名字，如 models/tiny-qwen3、Qwen/Qwen3-0.6B；"
        "不给时用书里训练的演示对话模型 models/demo-chat（会做加减法、排序、倒序和复述）",
    )
    p.add_argument(
        "--dtype",
        default="auto",
        help="auto（CUDA 上 bfloat16，其余 float32）、float32、bfloat16、float16",
    )
    p.add_argument(
        "--device",
        default=None,
        help="cpu、cuda、cuda:1、mps；不给时 MINISGL_DEVICE > cuda > mps > cpu",
    )
    p.add_argument("--tp", "--tp-size", dest="tp", type=int, default=1, help="张量并行的 rank 数")
    p.add_argument("--host", default=d.host)
    p.add_argument("--port", type=int, default=d.port, help="HTTP 端口；0 表示随便挑一个空闲的")
    p.add_argument("--num-pages", type=int, default=None, help="KV 池的页数（不给时按内存估算）")
    p.add_argument("--page-size", type=int, default=d.page_size, help="每页几个 token")
    p.add_argument(
        "--memory-fraction",
        type=float,
        default=d.memory_fraction,
        help="进程最多用掉设备内存的这个比例，剩下的都给 KV 池",
    )
    p.add_argument(
        "--max-running-reqs",
        "--max-running-requests",
        dest="max_running_reqs",
        type=int,
        default=d.max_running_reqs,
        help="同时在跑的请求数上限",
    )
    p.add_argument(
        "--max-seq-len-override",
        dest="max_seq_len",
        type=int,
        default=None,
        help="一个请求（提示 + 输出）最多多少个 token；不给时取模型的上限",
    )
    p.add_argument(
        "--max-extend-tokens",
        "--max-prefill-length",
        dest="max_extend_tokens",
        type=int,
        default=d.max_extend_tokens,
        help="一个 prefill 批次最多的新 token 数",
    )
    p.add_argument(
        "--cache-type",
        default=d.cache_type,
        choices=["radix", "naive"],
        help="前缀缓存：radix 复用相同前缀，naive 不缓存",
    )
    # >> ch17
    p.add_argument(
        "--kv-headroom",
        type=_headroom,
        default=d.kv_headroom,
        help="接纳新请求时为每个运行中的请求预留往后多少个 token 的 KV；"
        "full：预留到生成完（永不退回请求，但没写 max_tokens 的请求占住整个上下文）",
    )
    # << ch17
    p.add_argument("--attention-backend", default=d.attention_backend)
    p.add_argument(
        "--num-tokenizer",
        type=int,
        default=d.num_tokenizer,
        help="tokenizer 进程数；0 表示分词、反分词共用一个进程",
    )
    p.add_argument("--disable-cuda-graph", action="store_true", help="不捕获 CUDA Graph")
    # >> ch19
    p.add_argument(
        "--cuda-graph-prefill-tokens",
        type=int,
        default=None,
        help="prefill 的 CUDA Graph 录到一步多少个 token 为止；不给时等于 --max-extend-tokens，"
        "0 表示只录 decode 的图",
    )
    # << ch19
    p.add_argument("--dummy-weights", action="store_true", help="不读权重，填随机数（测速度用）")
    p.add_argument("--silent-output", action="store_true", help="调度器不打 INFO 日志")
    p.add_argument("--shell", action="store_true", help="不起 HTTP 服务，在终端里和模型对话")
    return p


# >> ch17
def _headroom(text: str) -> int | None:
    return None if text == "full" else int(text)


# << ch17
def _model_path(given: str | None) -> str:
    if given is not None:
        return os.path.expanduser(given)
    if not DEFAULT_MODEL.is_dir():
        _build_parser().error(
            f"默认模型 {DEFAULT_MODEL} 不存在：先在仓库根目录运行 "
            "python tools/make_tiny_model.py --ensure，或用 --model 指定模型"
        )
    # 在仓库根目录启动时写成 models/demo-chat：日志和录制的输出里不带这台机器的绝对路径
    relative = os.path.relpath(DEFAULT_MODEL)
    return str(DEFAULT_MODEL) if relative.startswith("..") else relative


def parse_args(argv: Sequence[str] | None = None, *, shell: bool = False) -> ServerArgs:
    """命令行 → ``ServerArgs``。``shell=True``（``python -m minisgl.shell``）等同于 ``--shell``。"""
    ns = _build_parser().parse_args(argv)
    kwargs = vars(ns).copy()
    tp = kwargs.pop("tp")
    dtype = kwargs.pop("dtype")
    try:
        kwargs["dtype"] = None if dtype == "auto" else dtype_from_str(dtype)
    except ValueError as e:  # 和下面一样，像 argparse 自己的错误那样报出来
        _build_parser().error(str(e))
    kwargs["use_cuda_graph"] = not kwargs.pop("disable_cuda_graph")
    kwargs["dummy_weights"] = kwargs.pop("dummy_weights")
    kwargs["model_path"] = _model_path(kwargs["model_path"])
    kwargs["shell"] = kwargs["shell"] or shell
    if kwargs["shell"]:
        # 交互模式只有一个用户：一次只跑一个请求，CUDA Graph 只录批大小 1，日志别刷掉对话
        kwargs["max_running_reqs"] = 1
        kwargs["cuda_graph_batch_sizes"] = (1,)
        kwargs["silent_output"] = True
    from minisgl.distributed import DistributedInfo

    try:
        return ServerArgs(tp_info=DistributedInfo(0, tp), **kwargs)
    except ValueError as e:  # 参数不合法：像 argparse 自己的错误一样报出来，不打 traceback
        _build_parser().error(str(e))
