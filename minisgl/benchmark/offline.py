"""离线的三项：整个工作负载的吞吐、每个批大小的 decode 延迟、prefill 吞吐。

我们的引擎和 transformers 走同样的输入：随机 token 的提示，``ignore_eos``（transformers 那边
``min_new_tokens = max_new_tokens``），按要求的输出长度计数。计时前都先预热一次：CUDA Graph、
Triton 的编译、cuBLAS 的选择都不算在内。
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from minisgl.core import SamplingParams
from minisgl.llm import LLM
from minisgl.utils import synchronize

__all__ = [
    "Workload",
    "decode_latency",
    "hf_decode_latency",
    "hf_prefill",
    "load_hf",
    "make_workload",
    "prefill_throughput",
    "run_hf",
    "run_ours",
    "timed",
]


@dataclass(frozen=True)
class Workload:
    """一批请求：每个请求的提示（token id）和要生成的 token 数。"""

    prompts: list[list[int]]
    output_lens: list[int]

    @property
    def output_tokens(self) -> int:
        return sum(self.output_lens)

    @property
    def input_tokens(self) -> int:
        return sum(len(p) for p in self.prompts)

    def describe(self) -> dict[str, Any]:
        return {
            "requests": len(self.prompts),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


def make_workload(
    num_requests: int,
    input_range: tuple[int, int],
    output_range: tuple[int, int],
    seed: int = 0,
    vocab: tuple[int, int] = (100, 10000),
) -> Workload:
    """nano-vllm / mini-sglang 的离线负载：输入、输出长度在闭区间里均匀分布，token 随机。

    同一个种子得到同一批请求（和设备、进程无关）。token 避开词表开头的特殊 token。"""
    rng = random.Random(seed)
    prompts, outs = [], []
    for _ in range(num_requests):
        n = rng.randint(*input_range)
        prompts.append([rng.randrange(*vocab) for _ in range(n)])
        outs.append(rng.randint(*output_range))
    return Workload(prompts, outs)


def timed(device: torch.device, fn: Callable[[], Any]) -> float:
    """``fn()`` 的秒数。两端各同步一次：GPU 是异步的，不同步的话起点会算进之前残留的工作，
    终点会漏掉还在排队的 kernel。"""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def _params(output_lens: Sequence[int]) -> list[SamplingParams]:
    return [SamplingParams(max_tokens=n, ignore_eos=True) for n in output_lens]


def run_ours(llm: LLM, work: Workload) -> dict[str, float]:
    """整个负载一次交给 ``LLM.generate``（调度器自己组批），返回用时和每秒输出 token 数。"""
    device = llm.scheduler.engine.device
    warm = make_workload(min(len(work.prompts), 8), (16, 64), (8, 8), seed=12345)
    llm.generate(warm.prompts, _params(warm.output_lens))
    got: list[int] = []
    seconds = timed(
        device,
        lambda: got.extend(
            len(o.token_ids) for o in llm.generate(work.prompts, _params(work.output_lens))
        ),
    )
    if got != work.output_lens:  # ignore_eos：每个请求都应该恰好生成要求的长度
        raise RuntimeError("the engine did not generate the requested number of tokens")
    return {"seconds": seconds, "output_tokens": sum(got), "tokens_per_s": sum(got) / seconds}


def decode_latency(llm: LLM, batch_size: int, context_len: int, steps: int, seed: int = 1) -> float:
    """批大小 ``batch_size``、上下文 ``context_len`` 时每一步 decode 的秒数。

    两次运行只差 ``steps`` 步 decode：``1 + steps`` 个 token 的用时减去 1 个 token（只有 prefill）
    的用时，prefill 就抵消了。两次用不同的随机提示，前缀缓存帮不上忙。"""
    device = llm.scheduler.engine.device

    def run(tokens: int, s: int) -> float:
        w = make_workload(batch_size, (context_len, context_len), (tokens, tokens), seed=s)
        return timed(device, lambda: llm.generate(w.prompts, _params(w.output_lens)))

    run(2, seed + 1000)  # 预热这个批大小
    return (run(1 + steps, seed) - run(1, seed + 1)) / steps


def prefill_throughput(llm: LLM, batch_size: int, context_len: int, seed: int = 2) -> float:
    """只做 prefill（生成 1 个 token）时每秒处理的提示 token 数。"""
    device = llm.scheduler.engine.device
    w = make_workload(batch_size, (context_len, context_len), (1, 1), seed=seed)
    seconds = timed(device, lambda: llm.generate(w.prompts, _params(w.output_lens)))
    return w.input_tokens / seconds


# ---------------------------------------------------------------- transformers


def load_hf(model_path: str, device: torch.device, dtype: torch.dtype, dummy: bool) -> Any:
    """transformers 的模型。``dummy``：没有权重文件时按配置随机初始化（固定种子）。"""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils.logging import disable_progress_bar

    disable_progress_bar()  # 不要"Loading weights"进度条
    if dummy:
        torch.manual_seed(0)
        config = AutoConfig.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    return model.to(device).eval()


def _hf_generate(model: Any, prompts: Sequence[Sequence[int]], new_tokens: int) -> Any:
    """左补齐的一个静态批次，恰好生成 ``new_tokens`` 个 token（不看停止符）。"""
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    device = model.device
    with torch.inference_mode():
        return model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=0,
        )


def run_hf(model: Any, work: Workload, batch_size: int = 64) -> dict[str, float]:
    """transformers 跑同一个负载：按顺序每 ``batch_size`` 个请求一个静态批次，每批生成到本批
    最长的输出。只按要求的输出长度计数——批里短的请求多生成的 token 不算。"""
    _hf_generate(model, work.prompts[:2], 4)  # 预热

    def run_all() -> None:
        for i in range(0, len(work.prompts), batch_size):
            _hf_generate(
                model, work.prompts[i : i + batch_size], max(work.output_lens[i : i + batch_size])
            )

    seconds = timed(model.device, run_all)
    return {
        "seconds": seconds,
        "output_tokens": work.output_tokens,
        "tokens_per_s": work.output_tokens / seconds,
    }


def hf_decode_latency(model: Any, batch_size: int, context_len: int, steps: int) -> float:
    """和 ``decode_latency`` 一样的减法：``1 + steps`` 个新 token 减去 1 个。"""
    prompts = make_workload(batch_size, (context_len, context_len), (1, 1), seed=3).prompts
    _hf_generate(model, prompts, 2)
    long = timed(model.device, lambda: _hf_generate(model, prompts, 1 + steps))
    short = timed(model.device, lambda: _hf_generate(model, prompts, 1))
    return (long - short) / steps


def hf_prefill(model: Any, batch_size: int, context_len: int) -> float:
    prompts = make_workload(batch_size, (context_len, context_len), (1, 1), seed=2).prompts
    seconds = timed(model.device, lambda: _hf_generate(model, prompts, 1))
    return batch_size * context_len / seconds
