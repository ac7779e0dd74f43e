"""``tools/offline_steps.py``：按批大小分段、记前向的钩子用完就摘掉；``--check`` 在 CPU 上把整个
流程走一遍，每一步的时间首尾相接、正好拼成整个负载的用时。GPU 上的数这里不测。"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import offline_steps  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_buckets_follow_the_batch_edges() -> None:
    assert offline_steps.bucket("prefill", 200) == "prefill"
    assert offline_steps.bucket("decode", 1) == "decode ≤1"
    assert offline_steps.bucket("decode", 2) == "decode ≤8"
    assert offline_steps.bucket("decode", 129) == "decode ≤192"
    assert offline_steps.bucket("decode", 256) == "decode ≤256"
    assert offline_steps.bucket("decode", 257) == "decode >256"


def test_record_forwards_logs_each_batch_and_puts_forward_back() -> None:
    class Scheduler:
        def forward(self, batch: Any) -> str:
            return f"ran {batch.size}"

    scheduler = Scheduler()
    rows: list[offline_steps.Forward] = []
    restore = offline_steps.record_forwards(scheduler, rows)
    reqs = [SimpleNamespace(device_len=5), SimpleNamespace(device_len=9)]
    batch = SimpleNamespace(phase="decode", size=2, num_tokens=2, reqs=reqs)
    assert scheduler.forward(batch) == "ran 2"
    restore()
    assert "forward" not in vars(scheduler)  # 换回了类上的方法
    assert scheduler.forward(batch) == "ran 2" and len(rows) == 1
    assert rows[0][1:] == ("decode", 2, 2, 14)


def test_check_splits_the_run_into_steps_that_add_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "steps.json"
    assert offline_steps.main(["--check", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["meta"]["command"] == f"python tools/offline_steps.py --check --out {out}"
    steps = result["steps"]
    assert steps and {s["phase"] for s in steps} == {"prefill", "decode"}
    assert all(s["seconds"] > 0 and s["floor_s"] > 0 for s in steps)
    assert all(s["new_tokens"] == s["batch_size"] for s in steps if s["phase"] == "decode")
    # 每个请求的第一个 token 出自 prefill，其余的各出自一步 decode
    work = result["workload"]
    decoded = sum(s["batch_size"] for s in steps if s["phase"] == "decode")
    assert decoded == work["output_tokens"] - work["requests"]
    assert sum(s["new_tokens"] for s in steps if s["phase"] == "prefill") == work["input_tokens"]
    # 相邻两次前向之间的时间首尾相接：第一步之前的一段加上每一步，正好是整个负载的用时
    total = result["before_first_step_s"] + sum(s["seconds"] for s in steps)
    assert total == pytest.approx(result["wall_s"], rel=1e-9)
    buckets = result["buckets"]
    assert sum(b["steps"] for b in buckets.values()) == len(steps)
    assert list(buckets)[0] == "prefill"
    printed = capsys.readouterr().out
    assert all(f"| {name} | {b['steps']} |" in printed for name, b in buckets.items())
