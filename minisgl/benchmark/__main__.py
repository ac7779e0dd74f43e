"""``python -m minisgl.benchmark``：一条命令跑完全部基准测试，结果写成 JSON。

两个预设：``full`` 是第 19 章正式结果用的负载（Qwen3-0.6B 形状、bf16 随机权重、256 个请求），
给 GPU 用；``quick`` 用内嵌的小模型和很小的负载，CPU 上几十秒跑完，用来看流程、做测试。

每一行都先在同样的形状上预热，再量 ``runs`` 次，报告中位数和最小、最大值。对照的是两种
transformers：普通的 ``generate``，和静态 KV 缓存 + ``torch.compile``（编译失败时记下错误，
接着跑别的）。
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch._dynamo.utils import counters

from minisgl.engine import has_weight_files
from minisgl.llm import LLM
from minisgl.models import ModelConfig
from minisgl.utils import dtype_from_str, pick_device

from . import offline, online, roofline
from .offline import HFPeer
from .report import PEERS, load_results, make_meta, render_markdown, save_results


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
    # 离线的 LLM 一步最多算几个新 token（SchedulerConfig.max_extend_tokens，默认 8192）：大显存的
    # GPU 上离线跑用 16384，和 vLLM 离线的 LLM 类、官方 mini-sglang 的离线基准一样；服务仍是默认值
    max_extend_tokens: int
    online_clients: tuple[int, ...]
    online_rounds: int
    online_tokens: int
    online_chat_clients: int  # 带、不带 max_tokens 的对照：并发的客户端数
    # 在线的客户端最多分到几个进程里：一个进程里几十个 openai 客户端，先满的是客户端自己的 GIL
    client_processes: int
    big_roof: bool
    runs: int  # 每一行预热之后量几次
    hf_offline_runs: int  # transformers 的离线负载量几次：普通的 generate 一次就要好几分钟
    hf_compile_backend: str  # torch.compile 的后端：GPU 上 inductor；CPU 的测试用 eager
    # 编译的 transformers 也跑离线负载吗：GPU 上它要为长缓存再编译一遍，再加几分钟，full 不跑
    hf_compiled_offline: bool
    # KV 池正好开页表的格子数（num_pages），不按内存的比例：quick 是测试用的，测试在一块 GPU 上
    # 好几个进程并行跑，按比例算时别的进程占着的显存也算进去，可能一页也开不出来。full 按比例
    # （离线的引擎 0.6，服务 0.3），和真实的部署一样
    kv_fits_table: bool


PRESETS = {
    "full": Preset(
        model="models/qwen3-0.6b-shape", dtype="bfloat16", requests=256, lengths=(100, 1024),
        hf_batch=64, decode_batches=(1, 8, 64, 256), context_len=512, decode_steps=64,
        hf_decode_steps=8, prefill_batch=64, max_extend_tokens=16384, online_clients=(1, 8, 64),
        online_rounds=4, online_tokens=128, online_chat_clients=64, client_processes=8,
        big_roof=True, runs=5, hf_offline_runs=1, hf_compile_backend="inductor",
        hf_compiled_offline=False, kv_fits_table=False,
    ),
    "quick": Preset(
        model="models/tiny-qwen3", dtype="float32", requests=16, lengths=(16, 64), hf_batch=8,
        decode_batches=(1, 8), context_len=64, decode_steps=8, hf_decode_steps=4,
        prefill_batch=8, max_extend_tokens=8192, online_clients=(1, 4), online_rounds=2,
        online_tokens=16, online_chat_clients=4, client_processes=1, big_roof=False, runs=3,
        hf_offline_runs=1, hf_compile_backend="eager", hf_compiled_offline=True,
        kv_fits_table=True,
    ),
}  # fmt: skip


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _log(start: float, text: str) -> None:
    print(f"[bench] {time.perf_counter() - start:.0f} 秒 · {text}", flush=True)


def _save(results: dict[str, Any], out: str | None) -> None:
    """长时间的运行每跑完一项就写一次：中途出错，前面的数不会丢。"""
    if out:
        save_results(results, out)


def _ms(stats: dict[str, Any]) -> str:
    return f"{stats['median']:.2f} 毫秒/步（{stats['min']:.2f}～{stats['max']:.2f}）"


def _bench_ours(
    p: Preset, llm: LLM, work: offline.Workload, results: dict[str, Any], t0: float
) -> None:
    """本书的引擎：离线、每个批大小的 decode、prefill。"""
    ours = offline.run_ours(llm, work, p.runs)
    secs = ours["seconds"]["median"]
    _log(t0, f"离线：{ours['tokens_per_s']['median']:,.0f} 输出 token/s（{secs:.1f} 秒）")
    results["offline"]["ours"] = ours
    for d in results["decode"]:
        bs = d["batch_size"]
        d["ours_ms"] = offline.decode_latency(llm, bs, p.context_len, p.decode_steps, p.runs)
        _log(t0, f"decode 批大小 {bs}：{_ms(d['ours_ms'])}，下限 {d['floor_ms']:.3f}")
    prefill = results["prefill"]
    prefill["ours_tokens_per_s"] = offline.prefill_throughput(
        llm, p.prefill_batch, p.context_len, p.runs
    )
    _log(t0, f"prefill：{prefill['ours_tokens_per_s']['median']:,.0f} 提示 token/s")


def _bench_peer(
    key: str,
    peer: HFPeer,
    p: Preset,
    work: offline.Workload,
    results: dict[str, Any],
    out: str | None,
    t0: float,
) -> None:
    """transformers 的一种用法。先 decode、prefill，最后离线：编译的那种会沿用之前更长的静态
    缓存，离线负载的缓存最长，放在最后才不拖慢 decode 那几行。"""
    name = dict(PEERS)[key]
    for d in results["decode"]:
        bs = d["batch_size"]
        d[f"{key}_ms"] = offline.hf_decode_latency(
            peer, bs, p.context_len, p.hf_decode_steps, p.runs
        )
        _log(t0, f"{name} decode 批大小 {bs}：{_ms(d[f'{key}_ms'])}")
        _save(results, out)
    rate = offline.hf_prefill(peer, p.prefill_batch, p.context_len, p.runs)
    results["prefill"][f"{key}_tokens_per_s"] = rate
    _log(t0, f"{name} prefill：{rate['median']:,.0f} 提示 token/s")
    _save(results, out)
    if key == "hf_compiled" and not p.hf_compiled_offline:
        return
    row = offline.run_hf(peer, work, p.hf_batch, p.hf_offline_runs)
    results["offline"][key] = row
    _log(t0, f"{name} 离线：{row['tokens_per_s']['median']:,.0f} 输出 token/s")
    _save(results, out)


def _bench_hf(
    p: Preset,
    model: str,
    work: offline.Workload,
    results: dict[str, Any],
    compile_backend: str | None,
    out: str | None,
    t0: float,
    plain: bool = True,
) -> None:
    """两种 transformers 共用一份模型。``compile_backend`` 为 None：不跑编译的那种；``plain`` 为
    False：不跑普通的那种（接着上一次跑时它已经跑完）。"""
    device, dtype = pick_device(), dtype_from_str(p.dtype)
    hf = offline.load_hf(model, device, dtype, dummy=not has_weight_files(model))
    if plain:
        results["peers"]["hf"] = {"label": dict(PEERS)["hf"]}
        _bench_peer("hf", HFPeer(hf), p, work, results, out, t0)
    if compile_backend is not None:
        info: dict[str, Any] = {"label": dict(PEERS)["hf_compiled"], "backend": compile_backend}
        results["peers"]["hf_compiled"] = info
        graphs = counters["stats"]["unique_graphs"]
        try:
            peer = HFPeer.static_compiled(hf, compile_backend)
            _bench_peer("hf_compiled", peer, p, work, results, out, t0)
        except Exception as e:  # 编译出错不该让整个运行白跑：记下原因，接着跑在线
            info["error"] = f"{type(e).__name__}: {e}"[:2000]
            _log(t0, f"{info['label']} 出错：{info['error'][:300]}")
        # dynamo 抓到的图数：0 说明 transformers 没有编译（条件不满足时它只打一条警告）
        info["graphs"] = counters["stats"]["unique_graphs"] - graphs
    del hf
    _free(device)


def _bench_online(p: Preset, model: str, results: dict[str, Any], t0: float) -> None:
    """补全接口的几档并发（每个请求 ``online_tokens`` 个 token）；再用按模型完整上下文启动的
    服务，对照对话接口带、不带 ``max_tokens``，以及不带时第 8 章的整段预留
    （``--kv-headroom full``）。"""
    common = ["--dtype", p.dtype, "--silent-output"]
    clients = str(max(p.online_clients))
    roof = roofline.DeviceRoof(**results["roof"])  # TPOT 的下限用这次运行量的屋顶线
    config = ModelConfig.from_pretrained(model)
    cost = roofline.ModelCost.of(config, dtype_from_str(p.dtype))
    levels = []
    compiled: list[str] = []  # 各个服务的日志里现编译的 kernel（连同预热的请求里的）
    kv = _server_kv(p, int(clients), 1024)
    with online.serve(model, *common, *kv, "--max-running-requests", clients,
                      "--max-seq-len-override", "1024", compiled=compiled) as base:  # fmt: skip
        for c in p.online_clients:
            procs = min(c, p.client_processes)
            level = online.run_clients(base, c, p.online_rounds, 32, p.online_tokens, procs)
            prompt = round(level["prompt_tokens"])  # 客户端的提示一样长（只差编号）
            floor = roofline.tpot_floor(cost, roof, c, prompt, p.online_tokens)
            levels.append({**level, "tpot_floor_ms": 1000 * floor})
            _log(t0, f"在线 {c} 个客户端：{json.dumps(levels[-1], ensure_ascii=False)}")
        results["online"] = {"max_tokens": p.online_tokens, "levels": levels}
        if p.client_processes > 1:  # 对照：同样多的客户端挤在一个进程里
            row = online.run_clients(base, int(clients), p.online_rounds, 32, p.online_tokens)
            results["online"]["one_client_process"] = row
            _log(t0, f"在线 {clients} 个客户端，一个进程：{json.dumps(row, ensure_ascii=False)}")
    chat = []
    # 不写 --max-seq-len-override：不带 max_tokens 的请求最多可以生成到模型的整个上下文
    common += ["--max-running-requests", str(p.online_chat_clients)]
    common += _server_kv(p, p.online_chat_clients, config.rotary_config.max_position)
    for headroom, sends in (("256", (True, False)), ("full", (False,))):
        with online.serve(model, *common, "--kv-headroom", headroom, compiled=compiled) as base:
            for send in sends:
                procs = min(p.online_chat_clients, p.client_processes)
                row = online.run_chat_clients(
                    base, p.online_chat_clients, p.online_rounds, 32, p.online_tokens, send, procs
                )
                chat.append({**row, "kv_headroom": headroom})
                _log(
                    t0, f"对话接口（kv_headroom {headroom}，max_tokens {send}）：{json.dumps(row)}"
                )
    results["online"]["compiled_kernels"] = compiled
    results["online"]["chat"] = chat


def _server_kv(p: Preset, rows: int, columns: int) -> list[str]:
    """服务的 KV 池多大：``rows`` 个请求、每个最多 ``columns`` 个 token（见 ``kv_fits_table``）。"""
    if p.kv_fits_table:
        return ["--num-pages", str(rows * columns)]
    return ["--memory-fraction", "0.3"]


def finished_parts(results: dict[str, Any], p: Preset) -> set[str]:
    """结果里已经跑完的部分：``ours``（本书的引擎）、``online``、``hf``、``hf_compiled``。
    每一部分看它最后写下的那一项；跑到一半的部分不算。"""
    prefill, done = results.get("prefill", {}), set()
    if "ours_tokens_per_s" in prefill:
        done.add("ours")
    if "chat" in results.get("online", {}):
        done.add("online")
    if "hf" in results.get("offline", {}):
        done.add("hf")
    compiled = results.get("peers", {}).get("hf_compiled", {})
    if "error" in compiled or (
        "hf_compiled" in results.get("offline", {})
        if p.hf_compiled_offline
        else "hf_compiled_tokens_per_s" in prefill
    ):
        done.add("hf_compiled")
    return done


def run(
    p: Preset,
    model: str,
    skip_hf: bool,
    skip_online: bool,
    argv: list[str] | None = None,
    out: str | None = None,
    skip_hf_compiled: bool = False,
    compile_backend: str | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """跑预设 ``p`` 的全部测试。``out``：每跑完一项就把已有的结果写进去。``argv``：记进结果的
    命令行参数，None 时取 ``sys.argv``。``compile_backend``：None 时用预设里的。

    ``resume``：接着 ``out`` 里上一次被打断的运行跑，已经跑完的部分（见 ``finished_parts``）
    不再跑，屋顶线和下限也沿用上一次的；这一次的命令和补跑的部分记在 ``meta["resumed"]`` 里。
    本书的引擎和某一种 transformers 的比值，两部分都出自第一次时才是同一次运行里的。"""
    _check_out(out, resume)
    t0 = time.perf_counter()
    device = pick_device()
    work = offline_workload(p)
    if resume:
        assert out is not None
        results = load_results(out)
        if results.get("settings") != _settings(p) or results.get("model") != model:
            raise ValueError(f"{out} was made with other settings: {results['meta']['command']}")
        skipped = {"online"} if skip_online else set()  # 这一次不跑的，不算补跑
        if skip_hf or skip_hf_compiled:
            skipped |= {"hf", "hf_compiled"} if skip_hf else {"hf_compiled"}
        done = finished_parts(results, p)
        todo = [x for x in ("ours", "online", "hf", "hf_compiled") if x not in done | skipped]
        results["meta"].setdefault("resumed", []).append({**make_meta(device, argv), "parts": todo})
        _log(t0, f"接着上一次跑：已经跑完 {sorted(done)}，这一次跑 {todo}")
    else:
        results, done = _start(p, model, device, work, argv, t0), set()
    if "ours" not in done:
        _run_ours(p, model, device, work, results, t0)
        _save(results, out)
    # 在线放在 transformers 之前：GPU 上 transformers 要跑好几分钟，中途出事时本书引擎的各项已经存下
    if not skip_online and "online" not in done:
        _bench_online(p, model, results, t0)
        _save(results, out)
    backend = None if skip_hf_compiled else (compile_backend or p.hf_compile_backend)
    peers = [] if skip_hf else ["hf"] + ([] if backend is None else ["hf_compiled"])
    if peers := [x for x in peers if x not in done]:
        backend = backend if "hf_compiled" in peers else None
        _bench_hf(p, model, work, results, backend, out, t0, plain="hf" in peers)
    _log(t0, "全部跑完")
    return results


def _settings(p: Preset) -> dict[str, int]:
    return {
        "runs": p.runs,
        "hf_offline_runs": p.hf_offline_runs,
        "decode_steps": p.decode_steps,
        "hf_decode_steps": p.hf_decode_steps,
        "max_extend_tokens": p.max_extend_tokens,
    }


def _start(
    p: Preset,
    model: str,
    device: torch.device,
    work: offline.Workload,
    argv: list[str] | None,
    t0: float,
) -> dict[str, Any]:
    """新的一次运行：元数据、设置、屋顶线和每一行的下限。"""
    dtype = dtype_from_str(p.dtype)
    dummy = not has_weight_files(model)
    results: dict[str, Any] = {"meta": make_meta(device, argv), "model": model, "dtype": p.dtype}
    results["settings"] = _settings(p)
    results["peers"] = {}
    _log(t0, f"{results['meta']['device']}，模型 {model}（{p.dtype}，随机权重 {dummy}）")

    roof = roofline.measure_roof(device, dtype, p.big_roof)
    results["roof"] = vars(roof)
    cost = roofline.ModelCost.of(ModelConfig.from_pretrained(model), dtype)
    max_bs = max(p.requests, *p.decode_batches)
    floor = roofline.workload_floor(cost, roof, work, max_bs)
    results["offline"] = {"workload": work.describe(), "floor_s": floor}
    results["decode"] = [
        {
            "batch_size": bs,
            "context_len": p.context_len,
            "floor_ms": 1000 * roofline.step_floor(cost, roof, bs, bs * p.context_len),
            "timing": "per_step",  # 每一步直接计时（早先的结果是两次运行相减，没有这一项）
        }
        for bs in p.decode_batches
    ]
    prefill_s = roofline.prefill_floor(cost, roof, p.prefill_batch, p.prefill_batch * p.context_len)
    results["prefill"] = {
        "batch_size": p.prefill_batch,
        "context_len": p.context_len,
        "floor_tokens_per_s": p.prefill_batch * p.context_len / prefill_s,
    }
    return results


def offline_workload(p: Preset) -> offline.Workload:
    """离线一行的负载：``p.requests`` 个请求，提示和输出长度都在 ``p.lengths`` 里，种子固定。"""
    return offline.make_workload(p.requests, p.lengths, p.lengths, seed=0)


def make_llm(p: Preset, model: str, device: torch.device) -> LLM:
    """离线、decode、prefill 几项共用的引擎：同时跑得下整个离线负载和最大的 decode 批次。"""
    max_bs, max_seq_len = max(p.requests, *p.decode_batches), 2 * p.lengths[1]
    kv = {"num_pages": max_bs * max_seq_len} if p.kv_fits_table else {"memory_fraction": 0.6}
    return LLM(
        model, device=device, dtype=dtype_from_str(p.dtype),
        dummy_weights=not has_weight_files(model), max_running_reqs=max_bs,
        max_seq_len=max_seq_len, max_extend_tokens=p.max_extend_tokens, **kv,
    )  # fmt: skip


def _run_ours(
    p: Preset,
    model: str,
    device: torch.device,
    work: offline.Workload,
    results: dict[str, Any],
    t0: float,
) -> None:
    llm = make_llm(p, model, device)
    _bench_ours(p, llm, work, results, t0)
    llm.shutdown()
    del llm
    _free(device)


def _check_out(out: str | None, resume: bool) -> None:
    """跑完一项才第一次写 ``out``：写不进去的路径在开始之前就报，不要等几分钟以后。"""
    if resume and not out:
        raise ValueError("--resume needs --out (the results of the interrupted run)")
    if out and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise ValueError(f"--out: the directory of {out} does not exist")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minisgl.benchmark", description=__doc__)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    ap.add_argument("--model", help="换一个模型（默认取预设里的）")
    ap.add_argument("--out", help="结果写到这个 JSON 文件")
    ap.add_argument("--skip-hf", action="store_true", help="不跑 transformers（两种都不跑）")
    ap.add_argument(
        "--skip-hf-compiled", action="store_true", help="不跑 transformers 静态缓存 + torch.compile"
    )
    ap.add_argument(
        "--hf-compile-backend",
        choices=("inductor", "eager"),
        help="torch.compile 的后端（默认取预设里的：full 是 inductor，quick 是 eager）",
    )
    ap.add_argument("--skip-online", action="store_true", help="不起服务")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="接着 --out 里被打断的那一次跑：已经跑完的部分不再跑",
    )
    ns = ap.parse_args(argv)
    try:
        _check_out(ns.out, ns.resume)
    except ValueError as e:  # 像 argparse 自己的错误那样报出来
        ap.error(str(e))
    preset = PRESETS[ns.preset]
    results = run(
        preset, ns.model or preset.model, ns.skip_hf, ns.skip_online, argv, ns.out,
        skip_hf_compiled=ns.skip_hf_compiled, compile_backend=ns.hf_compile_backend,
        resume=ns.resume,
    )  # fmt: skip
    print(render_markdown(results))
    if ns.out:
        save_results(results, ns.out)
        print(f"[bench] 写入 {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
