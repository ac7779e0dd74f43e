"""交互式 shell：不起 HTTP 服务，一个用户直接在终端里和模型多轮对话。

``python -m minisgl --model models/tiny-qwen3 --shell``，
或者 ``python -m minisgl.shell --model ...``。
启动器照常拉起调度器和 tokenizer，只是把 uvicorn 换成这里的 ``run_shell``：它和 API Server 用同一个
``FrontendManager``，一轮对话就是一个请求——把整段历史交给 tokenizer 套对话模板，边收边打印。

只有一个用户：启动器把 ``max_running_reqs`` 设为 1、CUDA Graph 只录批大小 1，调度器不打 INFO 日志。
采样参数来自环境变量 ``MINISGL_SHELL_TEMPERATURE``、``_TOP_K``、``_TOP_P``、``_MAX_TOKENS``
（第 1 章）。
"""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

from minisgl.core import SamplingParams
from minisgl.env import ENV
from minisgl.message import TokenizeMsg
from minisgl.server.api_server import FrontendManager

__all__ = ["HELP", "run_shell", "shell_sampling_params"]

# >> ch17
import io

# << ch17
HELP = "输入消息和模型对话；/reset 清空对话历史，/exit 或 Ctrl-D 退出；回答时按 Ctrl-C 打断。"


def shell_sampling_params() -> SamplingParams:
    """在调用的这一刻读环境变量：改了马上生效。"""
    return SamplingParams(
        temperature=ENV.SHELL_TEMPERATURE,
        top_k=ENV.SHELL_TOP_K,
        top_p=ENV.SHELL_TOP_P,
        max_tokens=ENV.SHELL_MAX_TOKENS,
    )


async def _chat_once(
    state: FrontendManager, uid: int, history: list[dict[str, str]], out: TextIO
) -> str | None:
    """一轮对话：整段历史作为一个请求发出去，回复边收边打印，返回完整的回复。"""
    msg = TokenizeMsg(uid=uid, text=list(history), sampling_params=shell_sampling_params())
    await state.send_one(msg)
    parts: list[str] = []
    async for ack in state.wait_for_ack(uid):
        # >> ch17
        if ack.status.finish_reason == "error":  # 被拒绝了（比如整段对话超出了上下文）：说明原因
            out.write(f"（没有回答：{ack.status.error}）")
            return None
        # << ch17
        out.write(ack.incremental_output)
        out.flush()
        parts.append(ack.incremental_output)
    return "".join(parts)


def run_shell(state: FrontendManager, out: TextIO | None = None) -> None:
    """读一行、答一轮，直到 /exit 或输入结束（Ctrl-D）。

    用一个长期存在的事件循环，每轮 ``run_until_complete`` 一次；读输入用普通的 ``input()``，放在
    事件循环之外：这时按 Ctrl-C 就是退出，而回答进行中按 Ctrl-C 只打断这一轮。
    """
    out = out or sys.stdout
    loop = asyncio.new_event_loop()
    history: list[dict[str, str]] = []  # 只有一个用户，也就只有一段历史
    # >> ch17
    # 终端送来的不是 UTF-8 的字节：只有 C 这类 locale 下 stdin 才默认把它们留成落单的代理项，
    # 别的 locale（或设了 PYTHONIOENCODING）下 input() 直接抛 UnicodeDecodeError，shell 就退出了
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(errors="surrogateescape")
    # << ch17
    print(HELP, file=out, flush=True)
    try:
        while True:
            try:
                line = input("> ").strip()
            except EOFError:
                print(file=out)
                return
            # >> ch17
            # 落单的代理项（见上）编码不成消息：换成 ?
            line = line.encode("utf-8", "replace").decode("utf-8")
            # << ch17
            if not line:
                continue
            if line == "/exit":
                return
            if line == "/reset":
                history.clear()
                print("（对话历史已清空）", file=out, flush=True)
                continue
            if line.startswith("/"):
                print(f"未知命令 {line}；可用的命令：/reset、/exit", file=out, flush=True)
                continue
            history.append({"role": "user", "content": line})
            uid = state.new_user()
            task = loop.create_task(_chat_once(state, uid, history, out))
            try:
                reply = loop.run_until_complete(task)
            except KeyboardInterrupt:  # 打断这一轮：停止等待，让后端中止它，历史里不留这一问
                task.cancel()
                loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
                loop.run_until_complete(state.abort_user(uid))
                history.pop()
                print("（已打断）", file=out, flush=True)
                continue
            print(file=out, flush=True)
            # >> ch17
            if reply is None:  # 这一问不留在历史里：否则之后的每一问都带着它，一样被拒绝
                history.pop()
                continue
            # << ch17
            history.append({"role": "assistant", "content": reply})
    finally:
        for task in asyncio.all_tasks(loop):  # 后台的 listen() 任务
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


# 判断 __name__：spawn 出来的子进程会以 __mp_main__ 的名字再导入本模块
if __name__ == "__main__":
    from minisgl.server import launch_server

    launch_server(shell=True)
