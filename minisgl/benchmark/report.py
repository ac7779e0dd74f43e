"""结果的 JSON 和它的两种样子：markdown 表格、SVG 图（matplotlib，构建网站时生成）。

JSON 里除了数字，还有产生它的命令、设备、torch 版本和日期：书里的每个数都能追到一次运行。
量了几次的数存成 ``{"median", "min", "max", "runs", "samples"}``，表格写中位数和偏差；早先的
结果里只有一个数，照样能排成表。
"""

from __future__ import annotations

import datetime
import io
import json
import platform
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "PEERS",
    "PLOT_STYLE",
    "load_results",
    "make_meta",
    "median",
    "render_markdown",
    "render_plots",
    "save_results",
    "svg_text",
    "web_figure",
]


def make_meta(device: torch.device, argv: list[str] | None = None) -> dict[str, str]:
    from minisgl.utils import device_summary

    args = sys.argv[1:] if argv is None else argv
    return {
        "command": " ".join(["python -m minisgl.benchmark", *args]),
        "device": device_summary(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
    }


def save_results(results: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n", "utf-8")


def load_results(path: str | Path) -> dict[str, Any]:
    results = json.loads(Path(path).read_text("utf-8"))
    for key in ("meta", "offline"):
        if key not in results:
            raise ValueError(f"{path}: not a benchmark result (missing {key!r})")
    return results


# 对照的 transformers：JSON 里的键 → 表头
PEERS = (("hf", "transformers generate"), ("hf_compiled", "transformers 静态缓存 + torch.compile"))


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


Stat = float | dict[str, Any] | None  # 一个数（早先的结果只量一次），或者几次测量的统计


def median(value: Stat) -> float | None:
    """用来比较的那个数：统计里的中位数。"""
    return value["median"] if isinstance(value, dict) else value


def _fmt(value: Stat, spec: str) -> str:
    """中位数，量了几次时后面跟着最大的偏差（最小、最大值离中位数远的那一边），只量一次时注明。"""
    mid = median(value)
    if mid is None:
        return "—"
    text = format(mid, spec)
    if not isinstance(value, dict):
        return text
    if value["runs"] == 1:
        return f"{text}（1 次）"
    spread = max(value["max"] - mid, mid - value["min"]) / mid if mid else 0.0
    return f"{text} (±{100 * spread:.0f} %)"


def _ratio(a: Stat, b: Stat) -> str:
    x, y = median(a), median(b)
    return f"{x / y:.1f}×" if x and y else "—"


def _share(part: float | None, whole: float | None) -> str:
    return f"{100 * part / whole:.0f} %" if part and whole else "—"


def _peers(r: dict[str, Any]) -> list[tuple[str, str]]:
    """结果里有的对照：新的结果记在 ``peers`` 里；早先的只有 ``hf``，看离线那一项有没有它。"""
    if "peers" in r:
        return [(k, name) for k, name in PEERS if k in r["peers"]]
    return [PEERS[0]] if "hf" in r["offline"] else []


def _error(r: dict[str, Any], key: str) -> str | None:
    return r.get("peers", {}).get(key, {}).get("error")


def _offline(r: dict[str, Any], peers: list[tuple[str, str]]) -> list[str]:
    off = r["offline"]
    w, floor = off["workload"], off.get("floor_s")
    out = [
        f"**离线**：{w['requests']} 个请求，输入 {w['input_tokens']} 个 token，"
        f"输出 {w['output_tokens']} 个 token（模型 {r['model']}，{r['dtype']}）",
        "",
    ]
    rows = []
    for key, name in [("ours", "mini-sglang（本书）"), *peers]:
        if key not in off:  # 对照出错、没有跑到这一项
            rows.append([name, "—", "—", "—", "—"])
            continue
        x = off[key]
        ratio = "—" if key == "ours" else _ratio(off["ours"]["tokens_per_s"], x["tokens_per_s"])
        share = _share(floor, median(x["seconds"]))
        rows.append(
            [name, _fmt(x["seconds"], ".1f"), _fmt(x["tokens_per_s"], ",.0f"), ratio, share]
        )
    if floor:
        rows.append(
            ["屋顶线下限", f"{floor:.1f}", f"{w['output_tokens'] / floor:,.0f}", "—", "100 %"]
        )
    out += _table(["", "用时（秒）", "输出 token/s", "本书是它的几倍", "下限 / 用时"], rows)
    for key, name in peers:
        if key in off:
            ratio = median(off["ours"]["tokens_per_s"]) / median(off[key]["tokens_per_s"])
            out += [f"本书的引擎是 {name} 的 **{ratio:.1f} 倍**。", ""]
    return out


# decode 一行是怎么量的（行里的 ``timing``）→ 表头里的说明；早先的结果没有这一项，不加说明
_TIMING = {"per_step": "；一次运行里整批都在 decode 时相邻两步的间隔，取中位数"}


def _decode(r: dict[str, Any], peers: list[tuple[str, str]]) -> list[str]:
    first = r["decode"][0]
    how = _TIMING.get(first.get("timing", ""), "")
    out = [f"**decode 每一步的延迟**（上下文 {first['context_len']} 个 token，毫秒{how}）", ""]
    rows = []
    for d in r["decode"]:
        row = [str(d["batch_size"]), _fmt(d["ours_ms"], ".2f")]
        row += [_fmt(d.get(f"{k}_ms"), ".2f") for k, _ in peers]
        row += [_ratio(d.get(f"{k}_ms"), d["ours_ms"]) for k, _ in peers]
        floor = d.get("floor_ms")
        row += [f"{floor:.3f}" if floor else "—", _share(floor, median(d["ours_ms"]))]
        rows.append(row)
    header = ["批大小", "本书", *(n for _, n in peers), *(f"快于 {n}" for _, n in peers)]
    return out + _table(header + ["下限", "下限 / 本书"], rows)


def _prefill(r: dict[str, Any], peers: list[tuple[str, str]], slow_notes: bool) -> list[str]:
    p = r["prefill"]
    out = [f"**prefill**（{p['batch_size']} 个请求 × {p['context_len']} 个 token）", ""]
    roof = p.get("floor_tokens_per_s")
    ours = p["ours_tokens_per_s"]
    rows = [["本书", _fmt(ours, ",.0f"), "—", _share(median(ours), roof)]]
    for key, name in peers:
        x = p.get(f"{key}_tokens_per_s")
        rows.append([name, _fmt(x, ",.0f"), _ratio(ours, x), _share(median(x), roof)])
    if roof:
        rows.append(["屋顶线上限", f"{roof:,.0f}", "—", "100 %"])
    out += _table(["", "提示 token/s", "本书是它的几倍", "实测 / 上限"], rows)
    return out + (_slow(ours) if slow_notes else [])


def _note(note: dict[str, Any]) -> str:
    steps = note["steps"]
    text = (
        f"prefill {steps.get('prefill_steps', 0)} 步、decode {steps.get('decode_steps', 0)} 步、"
        f"退回 {steps.get('retracted', 0)} 个请求，垃圾回收 {note['gc_pauses']} 次"
        f"（最长 {note['gc_longest_ms']:.1f} 毫秒），分配器重试 {note['alloc_retries']} 次"
    )
    if "wall_ms" in note:  # 早先的记录没有这几项
        outside = note["wall_ms"] - note["in_steps_ms"]
        text += (
            f"；共 {note['wall_ms']:.1f} 毫秒，在步里 {note['in_steps_ms']:.1f}"
            f"（最长的一步 {note['longest_step_ms']:.1f}），步外 {outside:.1f}"
        )
    if note.get("triton_compiles") is not None:
        text += f"；Triton 新编译 {note['triton_compiles']} 个 kernel"
        if kernels := note.get("triton_kernels"):  # 早先的结果只有个数
            text += "（" + "；".join(f"`{k}`" for k in kernels) + "）"
    return text


def _slow(x: dict[str, Any]) -> list[str]:
    """比中位数慢一倍以上的那几次：和它们一起记下的 ``sample_notes``，再附上最快的一次作对照。"""
    if not isinstance(x, dict) or len(x.get("notes", ())) != len(x["samples"]):
        return []  # 早先的结果只有一个数，或者没有记录
    notes, samples = x["notes"], x["samples"]
    slow = [i for i, v in enumerate(samples) if v < x["median"] / 2]
    if not slow:
        return []
    fastest = max(range(len(samples)), key=samples.__getitem__)
    out = [f"第 {i + 1} 次只有 {samples[i]:,.0f}：{_note(notes[i])}。" for i in slow]
    return out + [f"最快的第 {fastest + 1} 次：{_note(notes[fastest])}。", ""]


def _latency_cells(x: dict[str, Any]) -> list[str]:
    return [
        f"{x['ttft_p50_ms']:.1f} / {x['ttft_p99_ms']:.1f}",
        f"{x['tpot_p50_ms']:.2f} / {x['tpot_p99_ms']:.2f}",
    ]


def _online(o: dict[str, Any]) -> list[str]:
    out = [
        f"**在线**（`python -m minisgl`，openai 客户端流式请求，每个请求 "
        f"{o['max_tokens']} 个输出 token）",
        "",
    ]
    # 早先的结果没有 TPOT 的下限（tpot_floor_ms）、没有调度器等 GPU 的时间（gpu_wait_ms_per_step）：
    # 那时表里就不列这两栏
    floors = all("tpot_floor_ms" in x for x in o["levels"])
    waits = all("gpu_wait_ms_per_step" in x for x in o["levels"])
    rows = [
        [str(x["clients"]), str(x["requests"]), *_latency_cells(x),
         *([f"{x['tpot_floor_ms']:.3f}"] if floors else []),
         *([_fmt(x["gpu_wait_ms_per_step"], ".3f")] if waits else []),
         f"{x['latency_p50_s']:.3f}", f"{x['output_tokens_per_s']:,.0f}"]
        for x in o["levels"]
    ]  # fmt: skip
    header = ["并发", "请求数", "TTFT p50 / p99（毫秒）", "TPOT p50 / p99（毫秒）"]
    header += ["TPOT 下限（毫秒）"] if floors else []
    header += ["调度器每步等 GPU（毫秒）"] if waits else []
    out += _table(header + ["单个请求用时 p50（秒）", "输出 token/s"], rows)
    level = {x["clients"]: x for x in o["levels"]}
    if 1 in level and 8 in level:  # 目标：8 个客户端的 TPOT 不超过 1 个的 1.1 倍
        one, eight = level[1], level[8]
        ratio = eight["tpot_p50_ms"] / one["tpot_p50_ms"]
        line = f"8 个客户端的 TPOT p50 是 1 个客户端的 **{ratio:.2f} 倍**"
        if floors:  # 屋顶线上两者之比：多出来的只是另外 7 个请求的 KV
            ratio = eight["tpot_floor_ms"] / one["tpot_floor_ms"]
            prompt = one["prompt_tokens"]
            line += f"（下限之比 {ratio:.2f} 倍，每个请求的提示 {prompt:.0f} 个 token）"
        out += [line + "。", ""]
    one = o.get("one_client_process")
    if one:  # 客户端分到几个进程里量的；同样多的客户端挤在一个进程里时，满的是客户端自己
        procs = max(x.get("client_processes", 1) for x in o["levels"])
        out += [
            f"上表的客户端最多分到 {procs} 个进程里。对照：同样 {one['clients']} 个客户端挤在一个"
            f"进程里，{one['output_tokens_per_s']:,.0f} 输出 token/s，TTFT p99 "
            f"{one['ttft_p99_ms']:.0f} 毫秒。",
            "",
        ]
    if o.get("chat"):
        out += _chat(o["chat"], o["max_tokens"])
    rows = [(f"补全接口 {x['clients']} 个客户端", x) for x in o["levels"]]
    rows += [(f"对话接口 {_chat_label(x, o['max_tokens'])}", x) for x in o.get("chat", [])]
    stalls = [f"{name}：{x['triton_compiles']} 个" for name, x in rows if x.get("triton_compiles")]
    if stalls:  # 服务中途现编译一个 kernel，那一步就停几百毫秒，落在这一行的 p99 上
        out += ["测量中服务现编译了 kernel（每个都是一次几百毫秒的停顿）：" + "；".join(stalls), ""]
    if "compiled_kernels" in o:  # 服务日志里的警告：是哪几个（连同每个服务预热的请求里的）
        names = "；".join(f"`{k}`" for k in o["compiled_kernels"]) or "一个也没有"
        out += [f"服务的日志里现编译的 kernel（连同预热的请求）：{names}", ""]
    return out


def _chat_label(x: dict[str, Any], tokens: int) -> str:
    label = f"max_tokens={tokens}" if x["max_tokens_sent"] else "不带 max_tokens"
    if "kv_headroom" in x:
        label += f"，`--kv-headroom {x['kv_headroom']}`"
    return label


def _chat(chat: list[dict[str, Any]], tokens: int) -> list[str]:
    out = [
        f"**带不带 max_tokens**（对话接口，{chat[0]['clients']} 个客户端，每个请求读 {tokens} 个"
        " token；不带的读够了就关掉流；服务按模型的完整上下文启动。`--kv-headroom full` 是第 8 章的"
        "整段预留，256 是第 17 章的乐观接纳）",
        "",
    ]
    sampled = any("tokens_sampled" in x for x in chat)  # 早先的结果没有这一项
    rows = []
    for x in chat:
        read = x["tokens_read"]
        rows.append([
            _chat_label(x, tokens),
            f"{x['output_tokens_per_s']:,.0f}", *_latency_cells(x),
            str(x["peak_running"]), str(x["peak_waiting"]),
            str(read["min"]) if read["min"] == read["max"] else f"{read['min']}～{read['max']}",
        ])  # fmt: skip
        if sampled:  # 不带 max_tokens 时，客户端走了、服务还没中止的那几步白算了
            rows[-1].append(f"{x['tokens_sampled'] / read['sum']:.2f}")
    header = ["", "输出 token/s", "TTFT p50 / p99（毫秒）", "TPOT p50 / p99（毫秒）"]
    header += ["同时在跑（峰值）", "排队（峰值）", "每个请求读到的 token"]
    return out + _table(header + (["服务采样的 / 读到的"] if sampled else []), rows)


def _notes(r: dict[str, Any], peers: list[tuple[str, str]]) -> list[str]:
    """怎么量的（早先的结果里没有这一段），以及出错的对照。"""
    out = []
    s = r.get("settings")
    if s:
        out += [
            f"每一格先在同样的形状上预热，再量 {s['runs']} 次，写中位数，括号里是最小、最大值"
            f"离中位数最远的偏差；transformers 的离线负载量 {s['hf_offline_runs']} 次。",
            "",
        ]
        if "max_extend_tokens" in s:  # 早先的结果没有这一项：那时是默认的 8192
            out += [f"本书的离线一侧一步最多 prefill {s['max_extend_tokens']:,} 个新 token。", ""]
    for key, name in peers:
        if _error(r, key):
            out += [f"{name} 出错，没有跑完：`{_error(r, key)}`", ""]
        elif r.get("peers", {}).get(key, {}).get("graphs") == 0:
            out += [f"{name}：torch.compile 没有抓到任何图，实际是即时执行。", ""]
    return out


def header(meta: dict[str, Any], peers: dict[str, Any] | None = None) -> list[str]:
    """命令、设备、版本、日期；被打断后接着跑过的（``--resume``），每一次一行。``peers``：
    结果里有的 transformers；给了就只说补跑了其中有结果的（早先的结果把跳过的也记成补跑）。"""
    out = [f"`{meta['command']}` · {meta['device']} · torch {meta['torch']} · {meta['date']}", ""]
    for later in meta.get("resumed", []):  # 补跑的部分是另一个进程量的
        ran = [x for x in later["parts"] if peers is None or x not in dict(PEERS) or x in peers]
        parts = "、".join(dict(PEERS).get(x, x) for x in ran) or "（没有要补的）"
        out += [f"接着跑了一次：`{later['command']}` · {later['date']}，补跑了 {parts}", ""]
    return out


def render_markdown(r: dict[str, Any], slow_notes: bool = True) -> str:
    """结果 → markdown：离线吞吐、decode 延迟、prefill、在线、屋顶线，各一张表。``slow_notes``：
    prefill 表下面列出慢了一倍以上的那几次的记录（有的话）。"""
    out = header(r["meta"], r.get("peers", {}))
    peers = _peers(r)
    out += _notes(r, peers)
    out += _offline(r, peers)
    if r.get("decode"):
        out += _decode(r, peers)
    if r.get("prefill"):
        out += _prefill(r, peers, slow_notes)
    if r.get("online"):
        out += _online(r["online"])
    if r.get("roof"):
        roof = r["roof"]
        out.append(
            f"**屋顶线**：设备内拷贝 {roof['copy_bytes_per_s'] / 1e9:,.0f} GB/s（读 + 写），"
            f"{r['dtype']} 矩阵乘 {roof['matmul_flops'] / 1e12:,.1f} TFLOP/s"
        )
        out.append("")
    return "\n".join(out)


# 网页里的图：文字留作 SVG 的 <text>（不转成路径），由浏览器用网页的字体画，中文标签不依赖构建
# 机器上的中文字体；背景透明，黑色一律写成 currentColor，网页的浅色、深色模式下都跟着正文的颜色
PLOT_STYLE = {
    "svg.hashsalt": "minisgl",  # SVG 里的 id 固定：同样的 JSON 得到同样的图
    "svg.fonttype": "none",
    # 排版只用 matplotlib 自带的 DejaVu Sans 量字宽：哪台机器上画都是同一张图
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 10,  # 单位是 pt：10 pt = 13.3 px
    "legend.fontsize": 9.5,
    "text.color": "black",
    "axes.edgecolor": "black",
    "axes.labelcolor": "black",
    "xtick.color": "black",
    "ytick.color": "black",
    "grid.color": "black",
    "grid.alpha": 0.15,
}


@contextmanager
def web_figure() -> Iterator[Callable[..., Any]]:
    """在网页图的样式下画图：交出 ``new_figure(高, 行数=1)``，返回 ``(fig, axes)``，图宽 7 英寸
    （672 px，网页的正文栏放得下，不会缩小，字号按原尺寸显示时不小于 12 px）。"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def new_figure(height: float, rows: int = 1) -> tuple[Any, Any]:
        return plt.subplots(rows, 1, figsize=(7, height))

    with plt.rc_context(PLOT_STYLE), warnings.catch_warnings():
        # DejaVu Sans 里没有中文，量字宽时 matplotlib 会对每个汉字报一次缺字形
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        yield new_figure


def svg_text(fig: Any) -> str:
    """把画好的图写成可以直接嵌进网页的 SVG 文本，并关掉它。"""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", transparent=True, metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # 去掉 XML 声明和 DOCTYPE，直接嵌进网页
    # 没写颜色的文字默认是黑色：让整张图的默认填充也是 currentColor
    text = text.replace("<svg ", '<svg fill="currentColor" ', 1)
    return text.replace("#000000", "currentColor")


def render_plots(r: dict[str, Any]) -> str:
    """decode 延迟（对数坐标）和在线 TTFT / TPOT 两张图上下排，返回内嵌的 SVG 文本。"""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    panels = [k for k in ("decode", "online") if r.get(k)]
    if not panels:
        return ""
    with web_figure() as new_figure:
        fig, axes = new_figure(3.3 * len(panels), len(panels))
        axes = [axes] if len(panels) == 1 else list(axes)
        for ax, key in zip(axes, panels):
            if key == "decode":
                bs = [d["batch_size"] for d in r["decode"]]
                ax.plot(bs, [median(d["ours_ms"]) for d in r["decode"]], "o-", label="本书")
                for (peer, name), marker in zip(PEERS, "s^"):
                    if all(d.get(f"{peer}_ms") for d in r["decode"]):
                        ms = [median(d[f"{peer}_ms"]) for d in r["decode"]]
                        ax.plot(bs, ms, marker + "-", label=name)
                if all(d.get("floor_ms") for d in r["decode"]):
                    floor = [d["floor_ms"] for d in r["decode"]]
                    ax.plot(bs, floor, "--", color="black", label="屋顶线下限")
                ax.set(xscale="log", yscale="log", xlabel="批大小", ylabel="毫秒 / 步")
                ax.set_title("decode 每一步的延迟")
            else:
                levels = r["online"]["levels"]
                cs = [x["clients"] for x in levels]
                ax.plot(cs, [x["ttft_p50_ms"] for x in levels], "o-", label="TTFT p50")
                ax.plot(cs, [x["ttft_p99_ms"] for x in levels], "o:", label="TTFT p99")
                ax.plot(cs, [x["tpot_p50_ms"] for x in levels], "s-", label="TPOT p50")
                ax.plot(cs, [x["tpot_p99_ms"] for x in levels], "s:", label="TPOT p99")
                ax.set(xscale="log", yscale="log", xlabel="并发的客户端数", ylabel="毫秒")
                ax.set_title("在线服务：TTFT 和 TPOT")
            # 刻度写成普通的数（1、8、64；0.5、10），不用 10 的幂：指数的小字号太小
            ax.set_xticks(bs if key == "decode" else cs)
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                axis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="both")
            ax.legend(frameon=False)
        return svg_text(fig)  # 在样式里存：svg.fonttype、svg.hashsalt 是存图时才用的
