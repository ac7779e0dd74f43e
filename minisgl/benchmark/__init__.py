"""基准测试：离线吞吐、decode 延迟、prefill 吞吐、在线服务的 TTFT / TPOT，以及屋顶线。

同一次运行里把我们的引擎和 Hugging Face transformers 的 ``generate`` 放在同样的工作负载上，
结果连同命令、设备、torch 版本和日期存成 JSON（``report``），书里的表格和图都从 JSON 生成。
一条命令跑完：``python -m minisgl.benchmark --out results.json``（``--help`` 看预设）。
"""

from __future__ import annotations

from .offline import Workload, make_workload
from .report import load_results, render_markdown, save_results

__all__ = ["Workload", "load_results", "make_workload", "render_markdown", "save_results"]
