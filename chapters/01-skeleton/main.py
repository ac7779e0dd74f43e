# %% [markdown]
# # 第 1 章：工程骨架——环境变量、设备与工具
#
# 这一章还没有模型，只有后面每一章都要踩在上面的地基：
#
# - `minisgl.env`：带类型的 `MINISGL_*` 环境变量，用到时才读；
# - `minisgl.utils.device`：全书唯一知道 cuda / mps / cpu 区别的地方；
# - `minisgl.utils` 里的整数运算、登记表、日志和 torch 小工具。
#
# 在仓库根目录运行：`python chapters/01-skeleton/main.py`。有 GPU 时走 CUDA，没有时走 CPU，
# 输出的结构完全相同。

# %%
from __future__ import annotations

import os
from typing import Callable

import torch

from minisgl.env import ENV
from minisgl.utils import (
    Registry,
    align_down,
    align_up,
    call_if_main,
    cuda_graph_available,
    current_stream,
    default_dtype,
    device_summary,
    div_ceil,
    div_even,
    format_bytes,
    init_logger,
    is_sm90_supported,
    memory_info,
    new_event,
    new_stream,
    nvtx_annotate,
    pick_device,
    pin_memory,
    set_log_rank,
    stream_context,
    torch_dtype,
)

# %% [markdown]
# ## 1. 环境变量：用到时才读
#
# `ENV` 早在导入时就创建好了，但它不缓存任何值：每次访问 `ENV.X` 都重新读 `os.environ`。
# 所以在这里改环境变量，下一行就能看到效果。写错的值会报错，并说清是哪个变量。

# %%
print("交互模式的默认温度:", ENV.SHELL_TEMPERATURE)
os.environ["MINISGL_SHELL_TEMPERATURE"] = "0"
print("设置 MINISGL_SHELL_TEMPERATURE=0 之后:", ENV.SHELL_TEMPERATURE)

os.environ["MINISGL_SHELL_TOP_K"] = "abc"
try:
    print(ENV.SHELL_TOP_K)
except ValueError as e:
    print("写错的值:", e)
del os.environ["MINISGL_SHELL_TOP_K"]

print("\n全部变量:")
for state in ENV.describe():
    origin = f"来自环境变量，默认 {state.default}" if state.is_set else "默认"
    print(f"  {state.name:<26} = {state.value!s:<5} （{origin}）")

# %% [markdown]
# ## 2. 设备：参数 > MINISGL_DEVICE > cuda > mps > cpu
#
# 明确要求一个不存在的设备会报错，而不是悄悄退回 CPU。

# %%
device = pick_device()
print("选中的设备:", device)
print("设备摘要:", device_summary(device))
print("默认精度:", default_dtype(device))
print("能用 CUDA Graph:", cuda_graph_available(device))
print("Hopper（sm_90）及以上:", is_sm90_supported(device))
try:
    pick_device("cuda:99")
except RuntimeError as e:
    print("要一个不存在的设备:", e)

# CPU 上可以给本进程一个内存预算：总量就是预算，可用量 = 预算 - 本进程已经占用的内存
os.environ["MINISGL_CPU_MEMORY_BUDGET"] = "2G"
free, total = memory_info("cpu")
print(f"CPU 内存预算 2G: 总量 {format_bytes(total)}，可用 {format_bytes(free)}")
del os.environ["MINISGL_CPU_MEMORY_BUDGET"]

# %% [markdown]
# ## 3. 临时切换默认精度
#
# 第 5 章在 meta 设备上按目标精度构建模型，靠的就是 `torch_dtype`。它在出错时也会恢复原来的默认值。

# %%
with torch_dtype(torch.bfloat16):
    print("with 块里新建的张量:", torch.zeros(2).dtype)
try:
    with torch_dtype(torch.float16):
        raise RuntimeError("建模型时出错")
except RuntimeError:
    pass
print("出错之后的默认精度:", torch.get_default_dtype())

# %% [markdown]
# ## 4. 登记表：按名字找实现
#
# 命令行上的 `--attention-backend torch` 是一个字符串，代码要从它找到实现。
# 找不到时，错误信息列出所有支持的名字。

# %%
ACTIVATIONS: Registry[Callable[[torch.Tensor], torch.Tensor]] = Registry("activation")


@ACTIVATIONS.register("silu")
def silu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


@ACTIVATIONS.register("gelu")
def gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x)


print(ACTIVATIONS)
x = torch.tensor([-1.0, 0.0, 1.0])
print("silu([-1, 0, 1]) =", [round(v, 4) for v in ACTIVATIONS.get("silu")(x).tolist()])
for action in (lambda: ACTIVATIONS.get("relu"), lambda: ACTIVATIONS.register("silu")):
    try:
        action()
    except ValueError as e:
        print("错误:", e)

# %% [markdown]
# ## 5. 张量并行怎么分头：div_even 与对齐
#
# Qwen3-0.6B 有 16 个 Q 头、8 个 KV 头。tp 超过 8 时 KV 头不够分，每个 rank 放 1 个，
# 几个 rank 共用同一个头的副本（`allow_replicate=True`）。

# %%
num_q_heads, num_kv_heads = 16, 8
for tp in (1, 2, 4, 8, 16):
    q = div_even(num_q_heads, tp)
    kv = div_even(num_kv_heads, tp, allow_replicate=True)
    note = f"（每个 KV 头复制 {tp // num_kv_heads} 份）" if tp > num_kv_heads else ""
    print(f"tp={tp:<2} 每个 rank: {q:>2} 个 Q 头，{kv} 个 KV 头{note}")
try:
    div_even(num_q_heads, 3)
except ValueError as e:
    print("tp=3:", e)

tokens, page_size = 1000, 16
print(
    f"{tokens} 个 token、每页 {page_size} 个: 需要 {div_ceil(tokens, page_size)} 页，"
    f"向上对齐到 {align_up(tokens, page_size)}，向下对齐到 {align_down(tokens, page_size)}"
)

# %% [markdown]
# ## 6. 流与事件：为 CUDA 写的代码，在 CPU 上原样运行
#
# 下面这段是第 11 章重叠调度的缩影：在副流上计算、拷回 CPU，用事件等拷贝完成再读结果。
# CUDA 上它们是真正的流和事件；CPU 上是什么都不做的 `NullStream` / `NullEvent`——
# CPU 的算子本来就是同步的，没有要等的东西。

# %%
main_stream = current_stream(device)
side = new_stream(device)
done = new_event(device)
print("流的类型:", type(side).__name__, " 事件的类型:", type(done).__name__)
side.wait_stream(main_stream)
with stream_context(side):
    print("with 块里当前流是副流:", current_stream(device) == side)
    host = pin_memory(torch.arange(4), device)
    y = (host.to(device, non_blocking=True) * 2 + 1).to("cpu", non_blocking=True)
    done.record(side)
main_stream.wait_stream(side)
done.synchronize()
print("离开 with 后恢复成原来的流:", current_stream(device) == main_stream)
print("锁页（只在 CUDA 上）:", host.is_pinned(), " 结果:", y.tolist())

# %% [markdown]
# ## 7. NVTX 标注与日志
#
# `nvtx_annotate` 在 Nsight 的时间线上给一段代码命名；没有 CUDA 时什么都不做。
# 日志和 `print` 都写到 stdout，顺序不会乱；`info_rank0` 只在 rank 0 打印。


# %%
class Layer:
    def __init__(self, layer_id: int) -> None:
        self.layer_id = layer_id

    @nvtx_annotate("Layer_{}", layer_id_field="layer_id")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.layer_id


print("Layer(3).forward(1) =", Layer(3).forward(torch.tensor(1)).item())
print("NVTX 标注是否生效:", torch.cuda.is_available())

logger = init_logger("ch01", "main")
logger.info("日志和 print 在同一个流里")
set_log_rank(1)
logger.info_rank0("假装是 rank 1：这一行不会出现")
logger.warning("普通的日志每个 rank 都打印，行首带上 rank")
set_log_rank(None)


# %% [markdown]
# ## 8. call_if_main
#
# 只有当这个文件作为脚本运行时才调用被装饰的函数；被别的模块导入时什么都不做。


# %%
@call_if_main
def finish() -> None:
    print("作为脚本运行：call_if_main 调用了 finish()")
