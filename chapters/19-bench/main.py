# %% [markdown]
# # 第 19 章：基准测试
#
# 一条命令跑完全部基准测试：`python -m minisgl.benchmark`。这个 main 用内嵌的小模型跑它的
# `quick` 预设（16 个请求），把每一项打印出来；GPU 上的正式结果用 `--preset full`
# （Qwen3-0.6B 形状、bf16 随机权重、256 个请求），存成 JSON，书里的表和图都从那个 JSON 生成。
#
# 最后看这一章修的主机开销：decode 这一步给跨页的请求补页，以前每个请求各写一次页表。
#
# 在仓库根目录运行：`python chapters/19-bench/main.py`。

# %%
from __future__ import annotations

import os
import tempfile

import torch

from minisgl.benchmark import load_results, make_workload, render_markdown, save_results
from minisgl.benchmark.__main__ import PRESETS, run
from minisgl.kvcache import create_prefix_cache
from minisgl.scheduler.cache import CacheManager
from minisgl.scheduler.utils import SchedReq

MODEL = os.environ.get("MINISGL_MODEL", "models/tiny-qwen3")

# %% [markdown]
# ## 1. 工作负载
#
# 输入、输出长度在区间里均匀分布，token 随机，种子固定：同一个种子在哪台机器上都是同一批请求。

# %%
work = make_workload(256, (100, 1024), (100, 1024), seed=0)
print("full 预设的负载:", work.describe())
quick = PRESETS["quick"]
print("quick 预设的负载:", make_workload(quick.requests, quick.lengths, quick.lengths).describe())

# %% [markdown]
# ## 2. 跑一遍 quick 预设
#
# 离线吞吐（本书的引擎和 transformers 的 `generate` 各跑一遍同样的负载）、每个批大小的 decode
# 延迟、prefill 吞吐、在线服务（`python -m minisgl` + openai 客户端），最后是屋顶线。

# %%
results = run(quick, MODEL, skip_hf=False, skip_online=False, argv=["--preset", "quick"])
path = os.path.join(tempfile.mkdtemp(prefix="m19-"), "quick.json")
save_results(results, path)
# 慢了一倍以上的那几次的记录不打印：CPU 上别的进程一忙，哪一次都可能慢一倍，有没有这几行
# 随机器的负载变，和录制就没法逐行比较了（正式结果里它们照样列出来）
print(render_markdown(load_results(path), slow_notes=False))

# %% [markdown]
# ## 3. decode 补页：一次写完
#
# 页大小为 1 时，decode 的每一步每个请求都要一个新页。`ensure_decode_pages` 把整批的新槽位
# 攒成一次拷贝；结果和逐个 `ensure_pages` 完全一样。


# %%
def fresh(num_pages: int) -> CacheManager:
    table = torch.zeros(4, 16, dtype=torch.int32)
    return CacheManager(num_pages, 1, table, create_prefix_cache("naive", 1))


reqs = []
for i, n in enumerate([3, 5, 2, 7]):
    req = SchedReq(torch.arange(n, dtype=torch.int32), table_idx=i, output_len=4, uid=i)
    reqs.append(req)
one_by_one, batched = fresh(64), fresh(64)
for req in reqs:
    req.pages = []
    one_by_one.ensure_pages(req, req.device_len)
pages_a = [list(r.pages) for r in reqs]
for req in reqs:
    req.pages = []
batched.ensure_decode_pages(reqs)
pages_b = [list(r.pages) for r in reqs]
print("分到的页相同:", pages_a == pages_b)
print("页表相同:", torch.equal(one_by_one.page_table, batched.page_table))
print("第 3 行:", batched.page_table[3].tolist())
