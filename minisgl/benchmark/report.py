"""结果的 JSON 和它的两种样子：markdown 表格、SVG 图（matplotlib，构建网站时生成）。

JSON 里除了数字，还有产生它的命令、设备、torch 版本和日期：书里的每个数都能追到一次运行。
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
    "PLOT_STYLE",
    "load_results",
    "make_meta",
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


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.1f}×" if a and b else "—"


def render_markdown(r: dict[str, Any]) -> str:
    """结果 → markdown：离线吞吐、decode 延迟、prefill、在线、屋顶线，各一张表。"""
    meta, off = r["meta"], r["offline"]
    out = [f"`{meta['command']}` · {meta['device']} · torch {meta['torch']} · {meta['date']}", ""]
    w = off["workload"]
    out.append(
        f"**离线**：{w['requests']} 个请求，输入 {w['input_tokens']} 个 token，"
        f"输出 {w['output_tokens']} 个 token（模型 {r['model']}，{r['dtype']}）"
    )
    out.append("")
    rows = []
    for name, key in (("mini-sglang（本书）", "ours"), ("transformers generate", "hf")):
        if key in off:
            x = off[key]
            rows.append([name, f"{x['seconds']:.1f}", f"{x['tokens_per_s']:,.0f}"])
    if "floor_s" in off:
        fl = off["floor_s"]
        rows.append(["屋顶线下限", f"{fl:.1f}", f"{w['output_tokens'] / fl:,.0f}"])
    out += _table(["", "用时（秒）", "输出 token/s"], rows)
    if "hf" in off:
        ratio = off["ours"]["tokens_per_s"] / off["hf"]["tokens_per_s"]
        out += [f"本书的引擎是 transformers 的 **{ratio:.1f} 倍**。", ""]
    if r.get("decode"):
        out.append(f"**decode 每一步的延迟**（上下文 {r['decode'][0]['context_len']} 个 token）")
        out.append("")
        rows = [
            [
                str(d["batch_size"]),
                f"{d['ours_ms']:.2f}",
                f"{d['hf_ms']:.2f}" if d.get("hf_ms") else "—",
                _ratio(d.get("hf_ms"), d["ours_ms"]),
                f"{d['floor_ms']:.3f}" if d.get("floor_ms") else "—",
            ]
            for d in r["decode"]
        ]
        out += _table(
            ["批大小", "本书（毫秒）", "transformers（毫秒）", "快多少", "下限（毫秒）"], rows
        )
    if r.get("prefill"):
        p = r["prefill"]
        out.append(f"**prefill**（{p['batch_size']} 个请求 × {p['context_len']} 个 token）")
        out.append("")
        rows = [["本书", f"{p['ours_tokens_per_s']:,.0f}"]]
        if p.get("hf_tokens_per_s"):
            rows.append(["transformers", f"{p['hf_tokens_per_s']:,.0f}"])
        if p.get("floor_tokens_per_s"):
            rows.append(["屋顶线上限", f"{p['floor_tokens_per_s']:,.0f}"])
        out += _table(["", "提示 token/s"], rows)
    if r.get("online"):
        o = r["online"]
        out.append(
            f"**在线**（`python -m minisgl`，openai 客户端流式请求，每个请求 "
            f"{o['max_tokens']} 个输出 token）"
        )
        out.append("")
        rows = [
            [
                str(x["clients"]),
                str(x["requests"]),
                f"{x['ttft_p50_ms']:.1f} / {x['ttft_p99_ms']:.1f}",
                f"{x['tpot_p50_ms']:.2f} / {x['tpot_p99_ms']:.2f}",
                f"{x['latency_p50_s']:.3f}",
                f"{x['output_tokens_per_s']:,.0f}",
            ]
            for x in o["levels"]
        ]
        header = ["并发", "请求数", "TTFT p50 / p99（毫秒）", "TPOT p50 / p99（毫秒）"]
        out += _table(header + ["单个请求用时 p50（秒）", "输出 token/s"], rows)
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
                ax.plot(bs, [d["ours_ms"] for d in r["decode"]], "o-", label="本书")
                if all(d.get("hf_ms") for d in r["decode"]):
                    ax.plot(bs, [d["hf_ms"] for d in r["decode"]], "s-", label="transformers")
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
