"""``python -m minisgl.benchmark``：一条命令跑完全部基准测试，结果写成 JSON。

两个预设：``full`` 是第 19 章正式结果用的负载（Qwen3-0.6B 形状、bf16 随机权重、256 个请求），
给 GPU 用；``quick`` 用内嵌的小模型和很小的负载，CPU 上几十秒跑完，用来看流程、做测试。
"""

from __future__ import annotations

import argparse
import gc
import json
from dataclasses import dataclass
from typing import Any

import torch

from minisgl.engine import has_weight_files
from minisgl.llm import LLM
from minisgl.models import ModelConfig
from minisgl.utils import dtype_from_str, pick_device

from . import offline, online, roofline
from .report import make_meta, render_markdown, save_results


@dataclass(frozen=True)
class Preset:
    model: str
    dtype: str
    requests: int
    lengths: tuple[int, int]  # 输入、输出长度都在这个闭区间里均匀分布
    hf_batch: int
    decode_batches: tuple[int, ...]
    context_len: int  # decode 延迟、prefill 用的上下文长度
    decode_steps: int
    hf_decode_steps: int
    prefill_batch: int
    online_clients: tuple[int, ...]
    online_rounds: int
    online_tokens: int
    big_roof: bool


PRESETS = {
    "full": Preset(
        "models/qwen3-0.6b-shape", "bfloat16", 256, (100, 1024), 64, (1, 8, 64, 256),
        512, 64, 8, 64, (1, 8, 64), 4, 128, True,
    ),
    "quick": Preset(
        "models/tiny-qwen3", "float32", 16, (16, 64), 8, (1, 8),
        64, 8, 4, 8, (1, 4), 2, 16, False,
    ),
}  # fmt: skip


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run(
    p: Preset,
    model: str,
    skip_hf: bool,
    skip_online: bool,
    argv: list[str] | None = None,
    out: str | None = None,
) -> dict[str, Any]:
    """跑预设 ``p`` 的全部测试。``out``：每跑完一项就把已有的结果写进去（长时间的运行中途出错，
    前面的数不会丢）。``argv``：记进结果的命令行参数，None 时取 ``sys.argv``。"""
    device = pick_device()
    dtype = dtype_from_str(p.dtype)
    dummy = not has_weight_files(model)
    work = offline.make_workload(p.requests, p.lengths, p.lengths, seed=0)
    results: dict[str, Any] = {"meta": make_meta(device, argv), "model": model, "dtype": p.dtype}
    print(f"[bench] {results['meta']['device']}，模型 {model}（{p.dtype}，随机权重 {dummy}）")

    roof = roofline.measure_roof(device, dtype, p.big_roof)
    results["roof"] = vars(roof)
    cost = roofline.ModelCost.of(ModelConfig.from_pretrained(model), dtype)
    max_bs = max(p.requests, *p.decode_batches)

    llm = LLM(
        model, device=device, dtype=dtype, dummy_weights=dummy, max_running_reqs=max_bs,
        max_seq_len=2 * p.lengths[1], memory_fraction=0.6,
    )  # fmt: skip
    ours = offline.run_ours(llm, work)
    print(f"[bench] 离线：{ours['tokens_per_s']:,.0f} 输出 token/s（{ours['seconds']:.1f} 秒）")
    floor = roofline.workload_floor(cost, roof, work, max_bs)
    results["offline"] = {"workload": work.describe(), "ours": ours, "floor_s": floor}
    decode = []
    for bs in p.decode_batches:
        ms = 1000 * offline.decode_latency(llm, bs, p.context_len, p.decode_steps)
        fl = 1000 * roofline.step_floor(cost, roof, bs, bs * p.context_len)
        decode.append(
            {"batch_size": bs, "context_len": p.context_len, "ours_ms": ms, "floor_ms": fl}
        )
        print(f"[bench] decode 批大小 {bs}：{ms:.2f} 毫秒/步（下限 {fl:.3f}）")
    prefill_tok = p.prefill_batch * p.context_len
    prefill_s = roofline.prefill_floor(cost, roof, p.prefill_batch, prefill_tok)
    prefill = {
        "batch_size": p.prefill_batch,
        "context_len": p.context_len,
        "ours_tokens_per_s": offline.prefill_throughput(llm, p.prefill_batch, p.context_len),
        "floor_tokens_per_s": prefill_tok / prefill_s,
    }
    llm.shutdown()
    del llm
    _free(device)
    results["decode"], results["prefill"] = decode, prefill
    if out:
        save_results(results, out)

    if not skip_hf:
        hf = offline.load_hf(model, device, dtype, dummy)
        results["offline"]["hf"] = offline.run_hf(hf, work, p.hf_batch)
        print(f"[bench] transformers：{results['offline']['hf']['tokens_per_s']:,.0f} 输出 token/s")
        for d in decode:
            bs = d["batch_size"]
            d["hf_ms"] = 1000 * offline.hf_decode_latency(hf, bs, p.context_len, p.hf_decode_steps)
            print(f"[bench] transformers decode 批大小 {bs}：{d['hf_ms']:.2f} 毫秒/步")
        prefill["hf_tokens_per_s"] = offline.hf_prefill(hf, p.prefill_batch, p.context_len)
        del hf
        _free(device)
        if out:
            save_results(results, out)

    if not skip_online:
        args = ["--dtype", p.dtype, "--max-running-requests", str(max(p.online_clients))]
        args += ["--max-seq-len-override", "1024", "--silent-output", "--memory-fraction", "0.3"]
        levels = []
        with online.serve(model, *args) as base:
            for c in p.online_clients:
                levels.append(online.run_clients(base, c, p.online_rounds, 32, p.online_tokens))
                print(f"[bench] 在线 {c} 个客户端：{json.dumps(levels[-1], ensure_ascii=False)}")
        results["online"] = {"max_tokens": p.online_tokens, "levels": levels}
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minisgl.benchmark", description=__doc__)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    ap.add_argument("--model", help="换一个模型（默认取预设里的）")
    ap.add_argument("--out", help="结果写到这个 JSON 文件")
    ap.add_argument("--skip-hf", action="store_true", help="不跑 transformers")
    ap.add_argument("--skip-online", action="store_true", help="不起服务")
    ns = ap.parse_args(argv)
    preset = PRESETS[ns.preset]
    results = run(preset, ns.model or preset.model, ns.skip_hf, ns.skip_online, argv, ns.out)
    print(render_markdown(results))
    if ns.out:
        save_results(results, ns.out)
        print(f"[bench] 写入 {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
