"""手写 mini-sglang：一个从零重建的 LLM 推理引擎。

这个包按章节一点点长出来：第 1 章只有环境变量和一组工具函数，到第 15 章成为一个
OpenAI 兼容的推理服务。子包各管一层：``utils``（工具）、``models``（模型）、``layers``（算子）、
``engine``（单卡前向）、``scheduler``（调度）、``server``（服务）……

这里刻意不导入任何子模块：``import minisgl`` 不应该拉起 torch。启动器、分词进程、
命令行参数解析都只需要包里很轻的那一部分，没有理由为它们付出导入 torch 的一两秒。
"""

from __future__ import annotations

__version__ = "0.1.0"
