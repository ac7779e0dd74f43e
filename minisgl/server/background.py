"""在后台的子进程里运行 ``python -m minisgl``：各章的 main、基准测试都这样像普通用户一样用服务。

- 端口由内核挑一个空闲的，日志写进一个临时文件（出错时把最后一段带进异常）；
- 服务在自己的会话（进程组）里：结束时能把它和它的子进程当成一组来检查、来收拾；
- 就绪的标志是 ``/health`` 返回 200：启动器收齐所有子进程的"就绪"之后才开始监听端口；
- 无论中途出了什么错（包括在 notebook 里中断），解释器退出时整组进程都会被杀掉。
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

__all__ = ["BackgroundServer", "start_background_server"]


@dataclass
class BackgroundServer:
    proc: subprocess.Popen[bytes]  # 主进程（API Server）；它的 pid 也是进程组号
    url: str  # http://127.0.0.1:端口
    log_path: str
    startup_s: float  # 从启动到就绪的秒数

    def log_text(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self, timeout: float = 60) -> int:
        """像按 Ctrl-C 一样给主进程发 SIGINT，等它按顺序关闭，返回退出码；超时就整组杀掉。"""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """整组 SIGKILL，删掉日志。可以调用多次（解释器退出时还会再调用一次）。"""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # 已经正常关掉了
            pass
        self.proc.wait()
        if os.path.exists(self.log_path):
            os.unlink(self.log_path)


def start_background_server(
    model: str, *args: str, name: str = "minisgl", timeout: float = 300
) -> BackgroundServer:
    """启动 ``python -m minisgl --model MODEL ARGS...``，等到就绪再返回。

    ``model`` 只有配置、没有权重（比如 ``models/qwen3-0.6b-shape``）时自动加 ``--dummy-weights``，
    按真实形状填随机权重。服务没起来（进程退出或超时）时抛 ``RuntimeError``，带着日志的最后一段。
    """
    import httpx

    from minisgl.engine import has_weight_files

    with socket.socket() as s:  # 让内核挑一个空闲端口
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fd, log_path = tempfile.mkstemp(prefix=f"{name}-", suffix=".log")
    cmd = [sys.executable, "-m", "minisgl", "--model", model, "--port", str(port), *args]
    if not has_weight_files(model):
        cmd.append("--dummy-weights")
    with os.fdopen(fd, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = BackgroundServer(proc, f"http://127.0.0.1:{port}", log_path, 0.0)
    atexit.register(server.kill)
    start = time.time()
    while True:
        if proc.poll() is not None or time.time() - start > timeout:
            tail = server.log_text()[-3000:]
            server.kill()
            raise RuntimeError(f"the server did not start:\n{tail}")
        try:
            if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    server.startup_s = time.time() - start
    return server
