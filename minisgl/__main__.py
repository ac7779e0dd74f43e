"""``python -m minisgl``：启动兼容 OpenAI 接口的推理服务。

不给 ``--model`` 时服务书里训练的演示对话模型（``models/demo-chat``）；``--model Qwen/Qwen3-0.6B``
换成别的模型。加 ``--shell`` 则不起 HTTP 服务，直接在终端里和模型对话。
"""

from __future__ import annotations

from minisgl.server import launch_server

# 判断 __name__：spawn 出来的子进程会以 __mp_main__ 的名字再导入一次本模块，
# steps.py check 也会导入它；只有真正作为程序运行时才启动服务
if __name__ == "__main__":
    launch_server()
